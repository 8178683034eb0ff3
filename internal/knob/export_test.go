package knob

// WriteTree is writeTree for the tests in knob_test (nic_test.go), which use
// the fakes in knobtest and so cannot be in package knob.
var WriteTree = writeTree

// AutorateStopTimeout lets tests shorten how long writing Absent waits for
// an autorate daemon to exit.
var AutorateStopTimeout = &autorateStopTimeout
