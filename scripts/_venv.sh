# Sourced by scripts/*: create .venv with Python >= 3.11 and install the project.
PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
       && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      PYTHON=$candidate; break
    fi
  done
fi
[ -n "$PYTHON" ] || { echo "error: Python 3.11 or newer is needed" >&2; exit 1; }
VENV=${VENV:-$PWD/.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.installed-$(cat setup.cfg pyproject.toml | sha1sum | cut -c1-12)"
if [ ! -e "$stamp" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # compat mode puts the checkout on sys.path, where twistd finds twisted/plugins/
  "$VENV/bin/python" -m pip install -q -e '.[test]' --config-settings editable_mode=compat
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
# Bytecode on disk (cheap when up to date), so commands start fast even where
# PYTHONDONTWRITEBYTECODE is set.
"$VENV/bin/python" -m compileall -q ganeti twisted/plugins >/dev/null 2>&1 || true
export PATH="$VENV/bin:$PATH"
