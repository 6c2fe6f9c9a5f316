#!/usr/bin/env bash
# What `make container-test` needs on the machine, made present once and reused:
#
#   1. podman and debootstrap (apt-get, when either is missing; needs root);
#   2. a Debian bookworm base image with Python 3.11 and a venv module, built with
#      `debootstrap --variant=minbase` from the mirror apt itself uses and imported into
#      podman as $BASE_IMAGE (kept in podman's image store: later runs skip this step).
#
# No registry is reachable from these machines, so the base image is made, not pulled.
set -euo pipefail

BASE_IMAGE=${BASE_IMAGE:-localhost/kernel-deps-test/bookworm-python:1}

if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "container-test: podman and debootstrap are missing; install them (apt-get install podman debootstrap) or run as root" >&2
        exit 2
    fi
    echo "container-test: installing podman and debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman debootstrap >/dev/null
fi

if podman image exists "$BASE_IMAGE"; then
    echo "container-test: base image $BASE_IMAGE already built"
    exit 0
fi

# The mirror apt uses (deb822 .sources or one-line .list), so debootstrap needs no other.
mirror=$(
    { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
      grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'
    } | grep -v -e security -e '^$' | grep -m1 'debian' || true
)
mirror=${mirror:-http://deb.debian.org/debian}
echo "container-test: building $BASE_IMAGE with debootstrap from $mirror (a few minutes, once)"

work=$(mktemp -d /tmp/kernel-deps-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
podman import --quiet --change 'CMD ["/bin/bash"]' "$work/rootfs.tar" "$BASE_IMAGE" >/dev/null
echo "container-test: base image $BASE_IMAGE ready"
