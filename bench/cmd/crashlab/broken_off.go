//go:build !crashlab_broken

package main

const brokenBuild = false
