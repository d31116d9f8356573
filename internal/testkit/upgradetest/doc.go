// Package upgradetest holds the online upgrade test (make test-upgrade): the server and reactor
// binaries of earlier commits of this repository run under load, with a reactor SIGKILLed every
// few seconds, while the current `server migrate up` migrates their database; then the reactors
// and the servers are rolled to the current binaries as docs/operations.md "Upgrades" says, and
// the test checks that the upgrade lost, repeated and rewrote nothing and answered no request
// with a 5xx. It runs only with RECKON_UPGRADE_TEST=1; see upgrade_test.go.
package upgradetest
