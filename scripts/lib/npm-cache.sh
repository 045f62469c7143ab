# Sourced by scripts/install-*.sh: npm packages pinned into .cache/NAME, once.
#
#   npm_cache_install NAME READY_PATH OPTIONAL SPEC...
#
# Installs SPEC... (package@version) into .cache/NAME unless its stamp names exactly those specs
# and READY_PATH (relative to .cache/NAME) exists. OPTIONAL is "with" (keep optional dependencies:
# a per-platform binary) or "without" (--omit=optional: only JavaScript is needed).
npm_cache_install() {
  local name="$1" ready="$2" optional="$3"
  shift 3
  local repo_root prefix stamp want
  repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  prefix="${repo_root}/.cache/${name}"
  stamp="${prefix}/.installed"
  want="$*"
  if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" && -e "${prefix}/${ready}" ]]; then
    echo "install-${name}: ${want} already in ${prefix}" >&2
    return 0
  fi
  command -v npm >/dev/null || { echo "install-${name}: npm is required" >&2; return 1; }
  mkdir -p "${prefix}"
  echo "install-${name}: npm install ${want}" >&2
  local flags=(--silent --no-audit --no-fund --prefix "${prefix}")
  [[ "${optional}" == "without" ]] && flags+=(--omit=optional)
  npm install "${flags[@]}" "$@" >/dev/null
  printf '%s' "${want}" >"${stamp}"
}
