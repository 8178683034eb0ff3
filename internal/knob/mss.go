package knob

import (
	"context"
	"fmt"
	"strings"

	"github.com/lowlat/lowlat/internal/mssclamp"
)

// mssKnob is the TCP MSS clamp of one interface ("mss/eth0"): the
// nftables table inet lowlat_mss_eth0 (package mssclamp), in the calling
// thread's network namespace. Its value is the clamp in bytes ("536"),
// Absent for no table, or "@unmanaged: how it differs" for a table of that
// name that is not as lowlat writes it (changed by hand or by other
// software): drift when applied, and no value lowlat can write back.
type mssKnob struct {
	iface string
}

// MSSID returns the knob ID of iface's TCP MSS clamp.
func MSSID(iface string) string { return "mss/" + iface }

func newMSS(sys *System, iface string) (Knob, error) {
	if iface == "" || len(iface) > 15 || strings.ContainsAny(iface, "/ ") {
		return nil, fmt.Errorf("mss knob %q: want mss/<iface>", iface)
	}
	return &mssKnob{iface: iface}, nil
}

func (k *mssKnob) ID() string { return MSSID(k.iface) }

// Read returns the clamp the interface's table sets, Absent without one.
func (k *mssKnob) Read(ctx context.Context) (string, error) {
	st, err := mssclamp.Read(k.iface)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.ID(), err)
	}
	if !st.Present() {
		return Absent, nil
	}
	return st.String(), nil
}

// Write replaces the table with one clamping at value, or removes it for
// Absent.
func (k *mssKnob) Write(ctx context.Context, value string) error {
	if value == Absent {
		if err := mssclamp.Remove(k.iface); err != nil {
			return fmt.Errorf("%s: %w", k.ID(), err)
		}
		return nil
	}
	n, err := mssclamp.ParseMSS(value)
	if err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	if err := mssclamp.Write(k.iface, n); err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	return nil
}

// Validate accepts Absent and a clamp in bytes.
func (k *mssKnob) Validate(v string) error {
	if v == Absent {
		return nil
	}
	if strings.HasPrefix(v, mssclamp.UnmanagedPrefix) {
		return fmt.Errorf("%q describes a table changed outside lowlat, not a clamp to set", v)
	}
	_, err := mssclamp.ParseMSS(v)
	return err
}

// Satisfied: the same clamp, or both Absent. An unmanaged table satisfies
// nothing, so status reports it as drift.
func (k *mssKnob) Satisfied(live, desired string) bool { return MSSSatisfied(live, desired) }

// MSSSatisfied compares mss knob values.
func MSSSatisfied(live, desired string) bool {
	return live == desired && !strings.HasPrefix(live, mssclamp.UnmanagedPrefix)
}

// Restorable refuses a table lowlat did not write as it is: it cannot
// recreate it.
func (k *mssKnob) Restorable(v string) error {
	if why, ok := strings.CutPrefix(v, mssclamp.UnmanagedPrefix); ok {
		return fmt.Errorf("table inet %s is not as lowlat writes it (%s)", mssclamp.Table(k.iface), why)
	}
	return nil
}

// Fallback is no table: the kernel clamps nothing by itself.
func (k *mssKnob) Fallback(string) string { return Absent }

// mssWords says what an mss value means, for Describe.
func mssWords(v string) string {
	switch {
	case v == Absent:
		return "off"
	case strings.HasPrefix(v, mssclamp.UnmanagedPrefix):
		return "changed outside lowlat (" + strings.TrimPrefix(v, mssclamp.UnmanagedPrefix) + ")"
	}
	return v + " bytes"
}
