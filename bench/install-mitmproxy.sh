#!/usr/bin/env bash
# Installs mitmproxy 12.3.1 (the benchmark's reference) into a virtual
# environment under the build folder. It needs Python >= 3.12, and it pins a
# certifi newer than the registry has: its wheel comes without dependencies,
# then its Requires-Dist list with certifi unpinned.
# Prints the path of mitmdump on success; exits non-zero with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/bench-venv
version=12.3.1
if [ -x "$venv/bin/mitmdump" ] && "$venv/bin/mitmdump" --version 2>/dev/null | grep -q "Mitmproxy: $version"; then
  echo "$venv/bin/mitmdump"; exit 0
fi
python=""
for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    python=$(command -v "$candidate"); break
  fi
done
[ -n "$python" ] || { echo "no Python >= 3.12 found (pyenv install 3.12 gives one)" >&2; exit 1; }
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip >&2
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/pip" download --quiet --no-deps --dest "$wheels" "mitmproxy==$version" >&2
wheel=$(ls "$wheels"/mitmproxy-*.whl)
# Requires-Dist lines without extras markers; certifi unpinned.
requirements=$("$venv/bin/python" - "$wheel" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            req = line.split(":", 1)[1].strip()
            name = req.split(";")[0].strip()
            # Markers (sys_platform == "win32") stay: pip honours them.
            print("certifi" if name.lower().startswith("certifi") else req)
PY
)
echo "$requirements" | xargs -d '\n' "$venv/bin/pip" install --quiet >&2
"$venv/bin/pip" install --quiet --no-deps "$wheel" >&2
"$venv/bin/mitmdump" --version >&2
echo "$venv/bin/mitmdump"
