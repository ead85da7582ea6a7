#!/usr/bin/env bash
# Create .venv (Python >= 3.11) and install requirements.txt (pinned) plus the project itself
# (editable, --no-deps). Idempotent: pip is skipped while a hash stamp inside .venv shows that
# requirements.txt and pyproject.toml are unchanged since the last successful install.
# Progress: one line per package pip collects, so a first install never looks stuck.
#
#   scripts/bootstrap.sh             .venv with the pinned Django 5.2 LTS
#   scripts/bootstrap.sh --django6   .venv-django6: the same pins with Django 6.1, on Python
#                                    >= 3.12 (scripts/find-python); exits 3 when none exists
#
# Environment: PYTHON=/path/to/python3.x picks the interpreter for a new .venv.
# On Debian, a missing python3 / venv module is installed with apt-get (as root).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
DJANGO6_PIN="Django==6.1.3"
REQUIREMENTS="$ROOT/requirements.txt"
if [[ "${1:-}" == "--django6" ]]; then
    VENV="$ROOT/.venv-django6"
    if ! PYTHON="$("$ROOT/scripts/find-python" 3.12)"; then
        printf 'bootstrap: no Python >= 3.12 on this machine: Django 6.x needs one\n' >&2
        exit 3
    fi
    export PYTHON
    REQUIREMENTS="$(mktemp)"
    trap 'rm -f "$REQUIREMENTS"' EXIT
    sed -E "s/^Django==.*/$DJANGO6_PIN/" "$ROOT/requirements.txt" >"$REQUIREMENTS"
fi
STAMP="$VENV/.pai-bootstrap-stamp"
LOG="$VENV/.pai-bootstrap-pip.log"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

log() { printf 'bootstrap: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

py_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}

find_python() {
    local c
    for c in ${PYTHON:+"$PYTHON"} python3 python3.13 python3.12 python3.11; do
        if command -v "$c" >/dev/null 2>&1 && py_ok "$c"; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

apt_install() {
    if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        die "need $* (install them with your package manager, or run as root on Debian)"
    fi
    log "installing $* with apt-get (one-time)"
    local out
    out="$(mktemp)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$out" 2>&1 ||
        ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            -o Dpkg::Use-Pty=0 "$@" >>"$out" 2>&1; then
        cat "$out" >&2
        rm -f "$out"
        die "apt-get install $* failed (output above)"
    fi
    rm -f "$out"
}

venv_ok() {
    [[ -x "$VENV/bin/python" ]] && py_ok "$VENV/bin/python" &&
        { [[ -z "${PYTHON:-}" ]] || [[ "$("$VENV/bin/python" -c 'import sys; print(sys.version_info[:2])')" == "$("$PYTHON" -c 'import sys; print(sys.version_info[:2])')" ]]; } &&
        "$VENV/bin/python" -m pip --version >/dev/null 2>&1
}

create_venv() {
    local py ver
    if ! py="$(find_python)"; then
        apt_install python3 python3-venv
        py="$(find_python)" || die "no Python >= 3.11 found (set PYTHON=/path/to/python3.11)"
    fi
    # Debian splits ensurepip (needed by "python -m venv") into pythonX.Y-venv.
    if ! "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
        apt_install "python$ver-venv"
    fi
    if [[ -e "$VENV" ]]; then
        log "removing the broken .venv"
        rm -rf "$VENV"
    fi
    log "creating .venv with $py ($("$py" --version 2>&1))"
    "$py" -m venv "$VENV" || die "python -m venv failed"
    "$VENV/bin/python" -m pip install -q --upgrade pip >"$LOG" 2>&1 || {
        cat "$LOG" >&2
        die "could not upgrade pip in .venv"
    }
}

current_hash() {
    {
        cat "$REQUIREMENTS" "$ROOT/pyproject.toml"
        "$VENV/bin/python" -c 'import sys; print(sys.version)'
    } | sha256sum | cut -d' ' -f1
}

# pip install with one progress line per collected package (the full log goes to $LOG).
pip_with_progress() {
    local n=0 line
    : >"$LOG"
    set +o pipefail
    "$VENV/bin/python" -m pip install --progress-bar off "$@" 2>&1 | tee -a "$LOG" |
        while IFS= read -r line; do
            case "$line" in
            Collecting* | "Installing collected"*)
                n=$((n + 1))
                line="${line%% (from *}"
                printf 'bootstrap:   [%3d] %s\n' "$n" "${line:0:90}" >&2
                ;;
            esac
        done
    local rc="${PIPESTATUS[0]}"
    set -o pipefail
    return "$rc"
}

main() {
    local t0=$SECONDS hash
    [[ -f "$REQUIREMENTS" ]] || die "requirements.txt not found in $ROOT"
    venv_ok || create_venv

    hash="$(current_hash)"
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$hash" ]] &&
        "$VENV/bin/python" -c 'import importlib.metadata as m; m.version("pai-django")' \
            >/dev/null 2>&1; then
        return 0
    fi

    log "installing requirements.txt and the project (editable) into ${VENV#"$ROOT/"}" \
        "($(grep -c '==' "$REQUIREMENTS") pinned packages; a first install takes a minute or two)"
    rm -f "$STAMP"
    if ! pip_with_progress -r "$REQUIREMENTS"; then
        cat "$LOG" >&2
        die "pip install -r requirements.txt failed (output above)"
    fi
    if ! (cd "$ROOT" && "$VENV/bin/python" -m pip install -q --no-deps -e .) >>"$LOG" 2>&1; then
        cat "$LOG" >&2
        die "pip install -e . failed (output above)"
    fi
    printf '%s\n' "$hash" >"$STAMP"
    log "${VENV#"$ROOT/"} ready in $((SECONDS - t0))s"
}

main "$@"
