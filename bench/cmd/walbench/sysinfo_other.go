//go:build !linux

package main

// filesystem returns "unknown": only Linux is inspected.
func filesystem(dir string) (string, bool) { return "unknown (not Linux)", false }

// blockDevice returns "unknown": only Linux is inspected.
func blockDevice(dir string) string { return "unknown (not Linux)" }
