#!/usr/bin/env bash
# Makes the Dockerfile's Debian 12 base images locally, from Debian's packages, for machines that
# reach Debian's archive but no container registry (CI, air-gapped build hosts):
#   deploy/docker/make-base-image.sh [NAME]        (default: localhost/debian:bookworm)
# debootstrap --variant=minbase bookworm, trimmed as Debian's official -slim images are (no
# documentation, man pages or translations: the same dpkg path-excludes, so packages installed later
# stay trimmed too), imported with `podman import` and tagged NAME and NAME-slim: pass them as the
# Dockerfile's BUILD_IMAGE and RUNTIME_IMAGE build arguments (docs/deploy.md).
# The archive is this machine's own (its apt sources; DEBIAN_MIRROR overrides), and its apt
# settings for that archive (Acquire::Check-Valid-Until for a snapshot mirror) go into the image, so
# that apt-get in the build sees what apt-get here sees. Run as root (debootstrap). PODMAN overrides
# the podman command; tests/image sets CONTAINERS_CONF and CONTAINERS_STORAGE_CONF instead.
set -euo pipefail
NAME=${1:-localhost/debian:bookworm}
SUITE=bookworm
PODMAN=${PODMAN:-podman}

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list.d/debian.sources ]; then
  # deb822: the URIs of the stanza whose Suites name bookworm.
  mirror=$(awk -v s="$SUITE" '/^URIs:/{u=$2} /^Suites:/{for(i=2;i<=NF;i++) if($i==s) {print u; exit}} /^$/{u=""}' \
             /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk -v s="$SUITE" '$1=="deb" && $3==s {print $2; exit}' /etc/apt/sources.list)
fi
if [ -z "$mirror" ]; then
  echo "make-base-image: no Debian $SUITE archive in this machine's apt sources; set DEBIAN_MIRROR" >&2
  exit 1
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/grove-base.XXXXXX")
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

# As Debian's -slim images: documentation, man pages and translations excluded from now on.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
SLIM
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/groff/* "$root"/usr/share/info/* \
       "$root"/usr/share/lintian/* "$root"/usr/share/linda/*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
# As Debian's images: no downloaded packages or package lists kept.
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'CLEAN'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CLEAN
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/*

# The archive as apt here sees it: the same sources (all suites: updates, security) and settings.
if [ -f /etc/apt/sources.list.d/debian.sources ] && [ -z "${DEBIAN_MIRROR:-}" ]; then
  rm -f "$root/etc/apt/sources.list"
  grep -v '^#' /etc/apt/sources.list.d/debian.sources >"$root/etc/apt/sources.list.d/debian.sources"
fi
for conf in /etc/apt/apt.conf.d/*; do
  [ -f "$conf" ] || continue
  if grep -qE '^[[:space:]]*Acquire::Check-(Valid-Until|Date)' "$conf"; then
    grep -E '^[[:space:]]*Acquire::Check-(Valid-Until|Date)' "$conf" >"$root/etc/apt/apt.conf.d/99archive-validity"
  fi
done

tar --numeric-owner -C "$root" -c . | $PODMAN import --change 'CMD ["bash"]' - "$NAME" >/dev/null
$PODMAN tag "$NAME" "$NAME-slim"
size=$($PODMAN image inspect --format '{{.Size}}' "$NAME")
echo "make-base-image: $NAME and $NAME-slim from $SUITE ($((size / 1000000)) MB) in $(( $(date +%s) - start ))s"
