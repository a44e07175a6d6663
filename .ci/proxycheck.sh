#!/usr/bin/env bash
# Proves that a user can fetch durawal's modules once they are released, with
# no replace directive and no workspace: builds a Go module proxy (plain
# files) from the working tree at the release version the nested modules
# require, then, in a fresh module outside the repository, resolves and
# builds a program that imports wal, policy, raftstore, promwal and etcdraft (the
# README's first example plus the two adapters) and runs it. Needs no
# network: the third-party modules come from the local module cache, which
# the CI's earlier steps filled, and their checksums from the repository's
# go.sum files.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# The release version: what every published nested module requires of the
# library, what go.work points at the checkout, and a CHANGELOG heading.
version=$(awk '$1 == "github.com/durawal/durawal" {print $2}' raftstore/go.mod)
[ -n "$version" ] || { echo "raftstore/go.mod does not require github.com/durawal/durawal"; exit 1; }
for m in bench examples promwal raftstore etcdraft; do
	v=$(awk '$1 == "github.com/durawal/durawal" {print $2}' "$m/go.mod")
	[ "$v" = "$version" ] || { echo "$m/go.mod requires github.com/durawal/durawal $v, raftstore $version"; exit 1; }
	if grep -q '^replace' "$m/go.mod"; then echo "$m/go.mod has a replace directive"; exit 1; fi
done
grep -qx "replace github.com/durawal/durawal $version => ./" go.work ||
	{ echo "go.work does not point github.com/durawal/durawal $version at the checkout"; exit 1; }
grep -q "^## $version" CHANGELOG.md || { echo "CHANGELOG.md has no heading for $version"; exit 1; }
echo "release version $version"

work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
go run ./bench/cmd/modproxy -out "$work/proxy" -version "$version" . raftstore promwal etcdraft

# A fresh module, outside the repository and its go.work.
mkdir "$work/consumer"
cd "$work/consumer"
export GOWORK=off GOFLAGS=-mod=mod GONOSUMDB=github.com/durawal/durawal
# A module cache of its own: the machine's may hold an earlier build of this
# version (a previous run), which the go command would use instead of the
# proxy's. Third-party modules come from the machine's cache as a proxy.
export GOPROXY="file://$work/proxy,file://$(go env GOMODCACHE)/cache/download"
export GOMODCACHE="$work/modcache"
go mod init example.com/consumer >/dev/null 2>&1
# The README's first Go block, as it is shown.
awk '/^```go$/ {on=1; next} on && /^```$/ {exit} on' "$root/README.md" >main.go
cat >adapters.go <<'GO'
package main

import (
	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/promwal"
	"github.com/durawal/durawal/raftstore"
)

var (
	_ = raftstore.Open
	_ = promwal.NewCollector
	_ = etcdraft.Open
)
GO
# Checksums of the third-party modules, as the repository verified them.
cat "$root/go.sum" "$root/raftstore/go.sum" "$root/promwal/go.sum" "$root/etcdraft/go.sum" | sort -u >go.sum
go get "github.com/durawal/durawal@$version" "github.com/durawal/durawal/raftstore@$version" \
	"github.com/durawal/durawal/promwal@$version" "github.com/durawal/durawal/etcdraft@$version"
go build -o consumer .
grep -E '^(require|	github.com/durawal)' go.mod
out=$(./consumer)
echo "$out"
echo "$out" | grep -q 'set x=1' || { echo "the README's example did not print its records"; exit 1; }
echo "proxy check ok: wal, policy, raftstore, promwal and etcdraft $version resolve and build from a module proxy, with no replace and no workspace"
