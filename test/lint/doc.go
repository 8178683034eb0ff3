// Package lint holds checks on the repository's own test code that the
// compiler and go vet do not make: patterns that outside reviews found
// throwing away a package's whole test run.
package lint
