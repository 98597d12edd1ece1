// Package version says which spanperf this is.
package version

// Version and Revision are set at build time by the Makefile
// (-ldflags "-X .../version.Revision=...").
var (
	Version  = "0.1.0-dev"
	Revision = "unknown"
)
