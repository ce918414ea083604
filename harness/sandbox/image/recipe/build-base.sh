#!/bin/sh
# Build the offline base image: a Debian bookworm minbase rootfs (debootstrap) with git and
# python3 from Debian, plus Node from the npm registry's node-linux-<arch> package (Debian's
# Node 18 is ~50 ms slower to start and 20-40% slower on Jest: docs/sandbox.md#node-version).
# Usage: build-base.sh TAG NODE_TARBALL MIRROR     (run as root; needs debootstrap and docker)
set -eu
tag=$1; node_tgz=$2; mirror=$3
root=$(mktemp -d "${TMPDIR:-/var/tmp}/etai-rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=git,python3 bookworm "$root" "$mirror" >&2
tar -xzf "$node_tgz" -C "$root/usr/local" --strip-components=1 package/bin/node
chroot "$root" /usr/local/bin/node --version >&2
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc "$root"/usr/share/man
tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' -c 'CMD ["sleep", "infinity"]' - "$tag" >&2
