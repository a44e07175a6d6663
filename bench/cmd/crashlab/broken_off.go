//go:build !crashlab_broken && !crashlab_late

package main

// brokenBuild names the negative-control build this binary was built as,
// or is empty for the real library.
const brokenBuild = ""
