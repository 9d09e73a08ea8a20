#!/usr/bin/env python3
"""Gives a wheel another distribution name (scripts/build-wheel.sh --cuda: groveml -> groveml-cu13).

    scripts/rename_wheel.py WHEEL NEW_NAME OUT_DIR     prints the new wheel's path

pyproject.toml names one distribution, and PEP 621 does not let a build change it, so the CUDA
build is renamed after auditwheel: the .dist-info (and .data) folder, METADATA's Name and the file
name change and RECORD is written anew (hashes and sizes); the files, their modes and the tags are
kept, and so is the import name, groveml. A wheel whose METADATA or RECORD is not where the wheel
format puts it is refused.
"""

import base64
import hashlib
import os
import re
import sys
import zipfile


def normalize(name):
    # The wheel file name's and .dist-info's spelling of a distribution name (PEP 427 / PEP 503).
    return re.sub(r"[-_.]+", "_", name).lower()


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def rename(wheel, new_name, out_dir):
    base = os.path.basename(wheel)
    parts = base[:-len(".whl")].split("-")
    if not base.endswith(".whl") or len(parts) not in (5, 6):
        raise SystemExit(f"rename_wheel: {wheel} is not named as a wheel "
                         "(name-version-...-platform.whl)")
    old_info = f"{parts[0]}-{parts[1]}.dist-info"
    new_stem = normalize(new_name)
    new_info = f"{new_stem}-{parts[1]}.dist-info"
    # The .data folder, when there is one, is named after the distribution too.
    moves = {old_info: new_info, f"{parts[0]}-{parts[1]}.data": f"{new_stem}-{parts[1]}.data"}
    with zipfile.ZipFile(wheel) as src:
        names = src.namelist()
        if f"{old_info}/METADATA" not in names or f"{old_info}/RECORD" not in names:
            raise SystemExit(f"rename_wheel: {wheel} has no {old_info}/METADATA and RECORD")
        os.makedirs(out_dir, exist_ok=True)
        target = os.path.join(out_dir, "-".join([new_stem] + parts[1:]) + ".whl")
        records = []
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                if info.filename == f"{old_info}/RECORD":
                    continue
                data = src.read(info)
                top, sep, rest = info.filename.partition("/")
                name = moves.get(top, top) + sep + rest
                if name == f"{new_info}/METADATA":
                    text, count = re.subn(r"^Name: .*$", f"Name: {new_name}", data.decode(),
                                          count=1, flags=re.M)
                    if count != 1:
                        raise SystemExit(f"rename_wheel: {wheel}'s METADATA has no Name field")
                    data = text.encode()
                copy = zipfile.ZipInfo(name, info.date_time)
                copy.external_attr = info.external_attr  # the executables stay executable
                copy.compress_type = zipfile.ZIP_DEFLATED
                dst.writestr(copy, data)
                if not name.endswith("/"):  # RECORD lists files, not folders
                    records.append(record_line(name, data))
            records.append(f"{new_info}/RECORD,,")
            dst.writestr(zipfile.ZipInfo(f"{new_info}/RECORD", (2020, 1, 1, 0, 0, 0)),
                         "\n".join(records) + "\n")
    return target


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: scripts/rename_wheel.py WHEEL NEW_NAME OUT_DIR")
    print(rename(*sys.argv[1:]))
