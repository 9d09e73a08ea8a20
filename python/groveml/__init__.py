"""groveml: Grove's exact tree-ensemble predictions and SHAP explanations from Python.

  groveml.Model(path)             the engines inside this process (numpy, pandas, Arrow in; one
                                  row as a 1-D array, Series or dict); picklable
  groveml.Model.from_booster(b)   the same from a live XGBoost / LightGBM model, without a file
  groveml.Client("host:port")     the same calls against a running groved
  groveml.explain_spark / predict_spark   Spark DataFrames, through mapInArrow (the model sent)
  groveml.explain_dask / predict_dask     Dask DataFrames, through map_partitions

docs/python.md has the details and examples.
"""

from ._core import has_cuda, visible_gpus
from ._output import Explanation, TopFeatures
from .model import Model

__version__ = "0.1.0"


def __getattr__(name):
    # Client needs grpcio, the Spark and Dask helpers need pyspark / dask: imported when used.
    if name in ("Client", "RemoteModel"):
        from . import client
        return getattr(client, name)
    if name in ("explain_spark", "predict_spark"):
        from . import spark
        return getattr(spark, name)
    if name in ("explain_dask", "predict_dask"):
        from . import dask
        return getattr(dask, name)
    raise AttributeError(f"module 'groveml' has no attribute {name!r}")


__all__ = ["Model", "Client", "RemoteModel", "Explanation", "TopFeatures", "explain_spark", "predict_spark",
           "explain_dask", "predict_dask", "has_cuda", "visible_gpus", "__version__"]
