package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestTableAlignsAndColoursOnlyOnTTY(t *testing.T) {
	tb := Table{Header: []string{"knob", "value"}}
	tb.AddStrings("sysctl/net.core.somaxconn", "4096")
	tb.Add(S("qdisc/eth0/root", Bad), C("fq_codel"))
	var plain, color bytes.Buffer
	tb.Render(&plain, false)
	tb.Render(&color, true)
	want := "KNOB                       VALUE\nsysctl/net.core.somaxconn  4096\nqdisc/eth0/root            fq_codel\n"
	if plain.String() != want {
		t.Errorf("plain:\n%q\nwant\n%q", plain.String(), want)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("escape codes without a TTY")
	}
	if !strings.Contains(color.String(), "\x1b[31mqdisc/eth0/root\x1b[0m") {
		t.Errorf("no colour on a TTY: %q", color.String())
	}
	// Padding stays outside the colour so columns line up the same.
	stripped := strings.NewReplacer("\x1b[31m", "", "\x1b[0m", "", "\x1b[1m", "").Replace(color.String())
	if stripped != want {
		t.Errorf("coloured table misaligned:\n%q", stripped)
	}
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, map[string]string{"a": "<b>"}); err != nil {
		t.Fatal(err)
	}
	if b.String() != "{\n  \"a\": \"<b>\"\n}\n" {
		t.Errorf("JSON = %q", b.String())
	}
}
