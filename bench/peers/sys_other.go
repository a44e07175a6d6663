//go:build !linux

package main

func syncAll()             {}
func fsName(string) string { return "unknown" }
