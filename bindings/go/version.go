// Package sluice is the Go package of sluice, the rate limiter: a client of sluiced (RESP2 over
// TCP or TLS, pooled connections, pipelining, an over-limit cache, backoff with full jitter,
// fail-open or fail-closed when sluiced cannot be reached) and net/http middleware over it.
//
// It uses the standard library only. Decisions are made by sluiced; this package holds no
// limiter of its own (see the README: "In-process use").
package sluice

// Version is the version of sluice this package belongs to: the project's version in its
// CMakeLists.txt (the package test checks that they agree).
const Version = "0.1.0"
