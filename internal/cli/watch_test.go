package cli

import (
	"strings"
	"testing"
)

// Watch's flags that cannot be measured as given are one line each, before
// anything is loaded.
func TestWatchConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    watchOptions
		want string
	}{
		{"bad dscp", watchOptions{dscp: listFlag{"EF", "XX"}}, `--dscp: dscp "XX": want EF`},
		{"dscp twice", watchOptions{dscp: listFlag{"EF", "46"}}, "dscp EF named twice"},
		{"nine classes", watchOptions{dscp: listFlag{"1", "2", "3", "4", "5", "6", "7", "8", "9"}}, "dscp: at most 8 classes, got 9"},
		{"first bytes without tcp", watchOptions{firstBytes: listFlag{"1MB"}, ports: listFlag{"udp/7777"}}, "--first-bytes needs a TCP --port"},
		{"bad port", watchOptions{ports: listFlag{"sctp/1"}}, `port "sctp/1": the protocol is tcp or udp`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.window = 10e9
			_, err := tt.o.config()
			if err == nil {
				t.Fatalf("accepted %+v", tt.o)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q\nwant one line with %q", err, tt.want)
			}
		})
	}
	// A good split: the classes in the order given.
	o := watchOptions{dscp: listFlag{"EF", "af41", "8"}, window: 10e9}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.DSCP; len(got) != 3 || got[0] != 46 || got[1] != 34 || got[2] != 8 {
		t.Errorf("--dscp EF,af41,8: %v, want [46 34 8]", got)
	}
}
