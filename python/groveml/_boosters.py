"""Live XGBoost and LightGBM models as the bytes of their model files (Model.from_booster).

The objects are recognised by the module their class comes from, so that neither library is
imported here: a process without LightGBM can hand over an XGBoost model, and one without either
never pays for importing them. The bytes are those the library writes to a file: XGBoost's
`save_raw("ubj")` (the UBJSON of `save_model("model.ubj")`), LightGBM's `model_to_string()` (the
text of `save_model`, with its pandas categories).
"""

from typing import Optional, Tuple

LIBRARIES = ("xgboost", "lightgbm")


def library(obj) -> Optional[str]:
    """"xgboost" or "lightgbm" when obj's class (or a base class) comes from that library."""
    for cls in type(obj).__mro__:
        root = (getattr(cls, "__module__", "") or "").split(".")[0]
        if root in LIBRARIES:
            return root
    return None


def model_bytes(obj) -> Tuple[bytes, str]:
    """(the model file's bytes, a name for error messages) of a Booster or a scikit-learn
    wrapper. TypeError for anything else; the library's own error for an unfitted wrapper."""
    lib = library(obj)
    name = type(obj).__name__
    if lib == "xgboost" and hasattr(obj, "save_raw"):
        return bytes(obj.save_raw(raw_format="ubj")), f"<xgboost.{name}>"
    if lib == "xgboost" and hasattr(type(obj), "get_booster"):
        # An unfitted wrapper raises the library's NotFittedError here.
        return model_bytes(obj.get_booster())[0], f"<xgboost.{name}>"
    if lib == "lightgbm" and hasattr(obj, "model_to_string"):
        return obj.model_to_string().encode("utf-8"), f"<lightgbm.{name}>"
    if lib == "lightgbm" and hasattr(type(obj), "booster_"):
        return model_bytes(obj.booster_)[0], f"<lightgbm.{name}>"
    raise TypeError(f"from_booster takes an xgboost.Booster, XGBClassifier / XGBRegressor, a "
                    f"lightgbm.Booster or LGBMClassifier / LGBMRegressor (got {name}); "
                    "for a model file use groveml.Model(path)")
