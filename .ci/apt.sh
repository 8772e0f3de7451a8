# Sourced by the .ci/install-*.sh scripts: `apt_install NAME PACKAGE...` installs Debian packages
# quietly as root or through passwordless sudo, and on failure says why (naming NAME, the script's
# name in messages) and returns 1, so the tests that need the packages skip instead of failing.
apt_install() {
    local name="$1"
    shift
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "$name: apt-get not found; the tests that need it will skip" >&2
        return 1
    fi
    local sudo=""
    if [ "$(id -u)" != "0" ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "$name: not root and no passwordless sudo; the tests that need it will skip" >&2
            return 1
        fi
    fi
    local log
    log="$(mktemp)"
    if ! { DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -o Dpkg::Options::=--force-confold "$@"; } \
           >"$log" 2>&1; then
        echo "$name: apt-get failed (last lines below); the tests that need it will skip" >&2
        tail -5 "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

# Runs a command as root (directly, or through passwordless sudo).
as_root() {
    if [ "$(id -u)" = "0" ]; then "$@"; else sudo -n "$@"; fi
}
