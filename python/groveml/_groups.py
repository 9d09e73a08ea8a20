"""Feature groups as callers give them ({name: [feature names or indices]}), checked once for
in-process models and served models alike: a member is a feature name (str) or a feature index
(an integer, numpy's included; not a bool, not a float, as the server's JSON rule says)."""

import numbers


def group_members(groups):
    """[(name, [members])] of `groups` (None: None); ValueError naming what is malformed. Which
    members are features of the model is the engine's (or the server's) to check."""
    if groups is None:
        return None
    if not isinstance(groups, dict) or not groups:
        raise ValueError("groups must be a non-empty dict {name: [feature names or indices]}")
    out = []
    for name, members in groups.items():
        if isinstance(members, (str, bytes)) or not hasattr(members, "__iter__"):
            raise ValueError(f"group {name!r}: a list of feature names or indices was expected")
        checked = []
        for m in members:
            if isinstance(m, str):
                checked.append(m)
            elif isinstance(m, numbers.Integral) and not isinstance(m, bool):
                checked.append(int(m))
            else:
                raise ValueError(f"group {name!r}: {m!r} is neither a feature name nor a "
                                 "feature index (an integer)")
        out.append((str(name), checked))
    return out
