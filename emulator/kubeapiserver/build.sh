#!/usr/bin/env bash
# build.sh builds a real kube-apiserver and a real etcd from the Go module proxy into a cache
# directory outside the repository, for the kubeapiserver test harness.
#
#   bash emulator/kubeapiserver/build.sh        # prints the two binary paths on its last lines
#
# The cache is ${STALESWEEP_KUBE_CACHE:-$HOME/.cache/stalesweep/kube-v1.37.2}. A cold build takes
# minutes and a few GB of memory (see README.md); a warm one exits at once, because a stamp file
# records what the binaries were built from.
#
# `go install k8s.io/kubernetes/cmd/kube-apiserver@v1.37.2` cannot work: k8s.io/kubernetes
# requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and `replace`s them
# with ./staging/src/..., which the module proxy does not ship. So this script writes a small
# wrapper module that requires k8s.io/kubernetes and replaces each of those staging modules with
# its published v0.37.2, then builds two tiny mains in it: kube-apiserver's own main, and etcd's
# etcdmain at the version k8s.io/kubernetes itself requires.
set -euo pipefail

KUBE_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
CACHE="${STALESWEEP_KUBE_CACHE:-$HOME/.cache/stalesweep/kube-${KUBE_VERSION}}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
STAMP="$CACHE/stamp"

command -v go >/dev/null || { echo "build.sh: go not found on PATH" >&2; exit 1; }
mkdir -p "$CACHE"

# Another test binary may be building at the same moment: one build at a time.
if command -v flock >/dev/null; then
	exec 9>"$CACHE/.lock"
	flock 9
fi

# The stamp names what the binaries are built from. Bump RECIPE when a change to this script
# changes the binaries (flags, mains, the wrapper module); other edits then rebuild nothing.
RECIPE=1
want="kubernetes=$KUBE_VERSION staging=$STAGING_VERSION recipe=$RECIPE"
if [[ -x "$BIN/kube-apiserver" && -x "$BIN/etcd" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
	echo "$BIN/kube-apiserver"
	echo "$BIN/etcd"
	exit 0
fi
rm -f "$STAMP"

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off
start=$(date +%s)
echo "build.sh: building kube-apiserver and etcd $KUBE_VERSION into $BIN (cold: several minutes)" >&2

echo "build.sh: reading k8s.io/kubernetes@$KUBE_VERSION's go.mod" >&2
dl=$(cd "$CACHE" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" 2>&1) || true
kmod=$(echo "$dl" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
[[ -f "$kmod" ]] || { echo "build.sh: cannot download k8s.io/kubernetes@$KUBE_VERSION: $dl" >&2; exit 1; }

# Staging modules: those the release requires at v0.0.0 and replaces with ./staging/src/...
# (its replace block also names sample modules it never requires and that are not published).
required=$(awk '$1=="require"&&$2=="("{r=1;next} r&&$1==")"{r=0} r&&$2=="v0.0.0"{print $1}' "$kmod" | sort -u)
replaced=$(awk '$2=="=>"&&$3~/^\.\/staging\/src\//{print $1}' "$kmod" | sort -u)
staging=$(comm -12 <(echo "$required") <(echo "$replaced"))
[[ -n "$staging" ]] || { echo "build.sh: no staging modules found in $kmod" >&2; exit 1; }
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$kmod")
[[ -n "$etcd_version" ]] || { echo "build.sh: $kmod does not require go.etcd.io/etcd/server/v3" >&2; exit 1; }
echo "build.sh: $(echo "$staging" | wc -l) staging modules at $STAGING_VERSION, etcd $etcd_version" >&2

rm -rf "$SRC"
mkdir -p "$SRC/kube-apiserver" "$SRC/etcd" "$BIN"
{
	echo "module stalesweep.local/kubebuild"
	echo
	echo "go 1.26.0"
	echo
	echo "godebug default=go1.26"
	echo
	echo "require ("
	echo "	k8s.io/kubernetes $KUBE_VERSION"
	echo "	go.etcd.io/etcd/server/v3 $etcd_version"
	echo ")"
	echo
	echo "replace ("
	for m in $staging; do echo "	$m => $m $STAGING_VERSION"; done
	echo ")"
} >"$SRC/go.mod"

# kube-apiserver's own main (cmd/kube-apiserver/apiserver.go), imports included.
cat >"$SRC/kube-apiserver/main.go" <<'EOF'
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
EOF
cat >"$SRC/etcd/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF

# The version variables the release's own build stamps, so /version reports the release.
v=${KUBE_VERSION#v}
ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=${v%%.*}"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$v" | cut -d. -f2)"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

# -p 2 keeps the peak memory near 3 GB: the biggest packages compile two at a time at most.
echo "build.sh: compiling (go build -p 2)" >&2
(cd "$SRC" && go build -p 2 -ldflags "$ldflags" -o "$BIN/kube-apiserver.new" ./kube-apiserver)
(cd "$SRC" && go build -p 2 -o "$BIN/etcd.new" ./etcd)
mv -f "$BIN/kube-apiserver.new" "$BIN/kube-apiserver"
mv -f "$BIN/etcd.new" "$BIN/etcd"
echo "$want" >"$STAMP"
echo "build.sh: done in $(($(date +%s) - start))s" >&2
echo "$BIN/kube-apiserver"
echo "$BIN/etcd"
