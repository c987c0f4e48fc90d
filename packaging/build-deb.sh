#!/usr/bin/env bash
# Builds sinki_VERSION_ARCH.deb with dpkg-deb: the sinkid binary (Swift's runtime linked in, so it
# needs only Debian's libraries), the systemd user unit for the agent and the system unit for the
# server, the man pages, bash, zsh and fish completions, and the example config and the status schema
# under /usr/share/doc/sinki/. Usage: packaging/build-deb.sh [OUTPUT_DIR] (default packaging/out).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-packaging/out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

swift build -c release --product sinkid --static-swift-stdlib
bin="$(swift build -c release --show-bin-path)/sinkid"
version="$("$bin" --version | awk '{print $2}')"
arch="$(dpkg --print-architecture)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/sinki_${version}_${arch}"
doc="$root/usr/share/doc/sinki"

install -D -m 0755 "$bin" "$root/usr/bin/sinkid"
strip --strip-unneeded "$root/usr/bin/sinkid"
install -D -m 0644 packaging/systemd/sinkid.service "$root/usr/lib/systemd/user/sinkid.service"
install -D -m 0644 packaging/systemd/sinkid-serve.service "$root/usr/lib/systemd/system/sinkid-serve.service"
install -d "$root/usr/share/man/man1" "$root/usr/share/man/man5"
gzip -9n < packaging/man/sinkid.1 > "$root/usr/share/man/man1/sinkid.1.gz"
gzip -9n < packaging/man/sinki.conf.5 > "$root/usr/share/man/man5/sinki.conf.5.gz"
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
"$bin" completion bash > "$root/usr/share/bash-completion/completions/sinkid"
"$bin" completion zsh > "$root/usr/share/zsh/vendor-completions/_sinkid"
"$bin" completion fish > "$root/usr/share/fish/vendor_completions.d/sinkid.fish"
install -D -m 0644 sinki.conf.example "$doc/sinki.conf.example"
install -m 0644 docs/status.schema.json README.md "$doc/"
for page in docs/*.md; do install -m 0644 "$page" "$doc/$(basename "$page")"; done
cat > "$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: sinki
Files: *
Copyright: the sinki authors
License: see the sinki source repository
COPYRIGHT

# The packages holding the libraries the binary links directly.
depends=()
while read -r library; do
    package="$(dpkg -S "*/$library" 2>/dev/null | grep -v -- '-dev' | head -n1 | cut -d: -f1)"
    [ -n "$package" ] || { echo "build-deb: no package holds $library" >&2; exit 1; }
    depends+=("$package")
done < <(objdump -p "$bin" | awk '/NEEDED/ {print $2}')
depends_line="$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')"

install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: sinki
Version: $version
Architecture: $arch
Maintainer: sinki developers <sinki@localhost>
Section: net
Priority: optional
Depends: $depends_line
Installed-Size: $(du -sk "$root/usr" | cut -f1)
Description: keep folders in sync across Linux machines
 sinkid watches folders and keeps them in sync through a small sync server
 (sinkid serve): every change reaches the user's other machines within a
 fraction of a second, concurrent edits are settled by per-extension merge
 rules, and nothing a user wrote is lost. Includes a systemd user unit for
 the agent and a system unit for the server.
CONTROL

dpkg-deb --root-owner-group -Zxz --build "$root" "$out/sinki_${version}_${arch}.deb" >/dev/null
echo "$out/sinki_${version}_${arch}.deb"
