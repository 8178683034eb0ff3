package host

import (
	"reflect"
	"testing"
)

func TestAutoratePolicies(t *testing.T) {
	dir := mkTree(t, map[string]string{
		"etc/lowlat/autorate/eth0.policy":            "iface=eth0 min=1000000 base=1800000 max=3000000 reflectors= icmp= passive=on threshold=15ms\n",
		"etc/lowlat/autorate/.eth0.policy.tmp123456": "half-written",
		"etc/lowlat/autorate/README":                 "not a policy",
	})
	f := &Facts{}
	rd := &fileReader{r: Root{Dir: dir}, f: f}
	rd.autorate()
	want := map[string]string{"eth0": "iface=eth0 min=1000000 base=1800000 max=3000000 reflectors= icmp= passive=on threshold=15ms"}
	if !reflect.DeepEqual(f.Autorate, want) || len(f.Errors) != 0 {
		t.Errorf("Autorate = %v, errors %v; want %v", f.Autorate, f.Errors, want)
	}
	// No policy directory: nothing, and no error.
	f = &Facts{}
	rd = &fileReader{r: Root{Dir: t.TempDir()}, f: f}
	rd.autorate()
	if f.Autorate != nil || len(f.Errors) != 0 {
		t.Errorf("no directory: Autorate = %v, errors %v", f.Autorate, f.Errors)
	}
}
