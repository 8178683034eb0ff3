package host

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var captureVirtio = flag.Bool("capture-virtio", false, "recapture testdata/hosts/virtio-vm from this machine")

// TestCaptureVirtioFixture rebuilds the virtio-vm fixture from the machine the
// test runs on (a 2-vCPU virtio VM): CaptureTree for the files, and, because
// the live netlink reader lives elsewhere, a lowlat-netlink.json assembled from
// ip, tc and ethtool output. Test code may parse those tools; lowlat may not.
// Private or incidental state is then removed: hostname, boot id, and the ifb
// devices other tests leave behind.
func TestCaptureVirtioFixture(t *testing.T) {
	if !*captureVirtio {
		t.Skip("run with -capture-virtio on the 2-vCPU build VM to recapture")
	}
	dir := filepath.Join("testdata", "hosts", "virtio-vm")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := CaptureTree(Root{}, dir); err != nil {
		t.Fatal(err)
	}
	nl := toolNetlink(t)
	sanitizeVirtio(t, dir, nl)
	b, err := json.MarshalIndent(nl, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, NetlinkFile), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// virtual devices created by other sessions' tests, not part of the VM.
func incidental(name string) bool {
	return strings.HasPrefix(name, "ifb") || strings.HasPrefix(name, "veth")
}

func sanitizeVirtio(t *testing.T, dir string, nl *StaticNetlink) {
	t.Helper()
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/sys/kernel/hostname", "virtio-vm\n")
	write("proc/sys/kernel/random/boot_id", "5b0c7a52-1f4e-4b8e-a7c3-0d9e6f2a8c11\n")
	// Drop incidental interfaces from sysfs and the per-interface sysctls.
	var rm []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && incidental(fi.Name()) {
			rm = append(rm, p)
		}
		return nil
	})
	for _, p := range rm {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	var links []Link
	keep := map[int]bool{}
	for _, l := range nl.LinkList {
		if !incidental(l.Name) {
			links = append(links, l)
			keep[l.Index] = true
		}
	}
	nl.LinkList = links
	var qds []LinkQdisc
	for _, q := range nl.QdiscList {
		if keep[q.Ifindex] {
			qds = append(qds, q)
		}
	}
	nl.QdiscList = qds
	for name := range nl.EthtoolBy {
		if incidental(name) {
			delete(nl.EthtoolBy, name)
		}
	}
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}

// toolNetlink builds the netlink stand-in from ip/tc/ethtool JSON and text.
func toolNetlink(t *testing.T) *StaticNetlink {
	var links []struct {
		Ifindex  int      `json:"ifindex"`
		Ifname   string   `json:"ifname"`
		Flags    []string `json:"flags"`
		MTU      int      `json:"mtu"`
		Oper     string   `json:"operstate"`
		Txqlen   int      `json:"txqlen"`
		Address  string   `json:"address"`
		NumTx    int      `json:"num_tx_queues"`
		NumRx    int      `json:"num_rx_queues"`
		LinkInfo *struct {
			Kind string `json:"info_kind"`
		} `json:"linkinfo"`
	}
	if err := json.Unmarshal(run(t, "ip", "-d", "-j", "link", "show"), &links); err != nil {
		t.Fatal(err)
	}
	nl := &StaticNetlink{EthtoolBy: map[string]*Ethtool{}}
	byName := map[string]int{}
	for _, l := range links {
		link := Link{Name: l.Ifname, Index: l.Ifindex, MTU: l.MTU, TxQueueLen: l.Txqlen, NumTxQueues: l.NumTx,
			NumRxQueues: l.NumRx, OperState: strings.ToLower(l.Oper), MAC: l.Address}
		for _, f := range l.Flags {
			link.Up = link.Up || f == "UP"
			link.Loopback = link.Loopback || f == "LOOPBACK"
		}
		if l.LinkInfo != nil {
			link.Kind = l.LinkInfo.Kind
		}
		nl.LinkList = append(nl.LinkList, link)
		byName[l.Ifname] = l.Ifindex
		if !link.Loopback {
			if e := toolEthtool(l.Ifname); e != nil {
				nl.EthtoolBy[l.Ifname] = e
			}
		}
	}
	var qds []struct {
		Kind    string         `json:"kind"`
		Handle  string         `json:"handle"`
		Dev     string         `json:"dev"`
		Root    bool           `json:"root"`
		Parent  string         `json:"parent"`
		Options map[string]any `json:"options"`
		Bytes   uint64         `json:"bytes"`
		Packets uint64         `json:"packets"`
		Drops   uint64         `json:"drops"`
		Over    uint64         `json:"overlimits"`
		Requeue uint64         `json:"requeues"`
		Backlog uint64         `json:"backlog"`
		Qlen    uint64         `json:"qlen"`
	}
	if err := json.Unmarshal(run(t, "tc", "-s", "-j", "qdisc", "show"), &qds); err != nil {
		t.Fatal(err)
	}
	for _, q := range qds {
		parent := q.Parent
		if q.Root {
			parent = "root"
		}
		opts := map[string]string{}
		for k, v := range q.Options {
			switch v := v.(type) {
			case []any:
				var s []string
				for _, x := range v {
					s = append(s, fmt.Sprint(x))
				}
				opts[k] = strings.Join(s, " ")
			case bool:
				if k == "multiqueue" && !v {
					continue // tc's own flag for pfifo_fast, not an option
				}
				opts[k] = map[bool]string{true: "on", false: "off"}[v]
			default:
				opts[k] = fmt.Sprint(v)
			}
		}
		nl.QdiscList = append(nl.QdiscList, LinkQdisc{Ifindex: byName[q.Dev], Qdisc: Qdisc{
			Kind: q.Kind, Handle: q.Handle, Parent: parent, Options: opts,
			Stats: QdiscStats{Bytes: q.Bytes, Packets: q.Packets, Drops: q.Drops, Overlimits: q.Over,
				Requeues: q.Requeue, Backlog: q.Backlog, Qlen: q.Qlen},
		}})
	}
	tables := map[string]int{"main": 254, "local": 255, "default": 253}
	for _, fam := range []string{"inet", "inet6"} {
		var routes []struct {
			Type     string           `json:"type"`
			Dst      string           `json:"dst"`
			Gateway  string           `json:"gateway"`
			Dev      string           `json:"dev"`
			Table    string           `json:"table"`
			Protocol string           `json:"protocol"`
			Scope    string           `json:"scope"`
			Prefsrc  string           `json:"prefsrc"`
			Metric   int              `json:"metric"`
			Metrics  []map[string]any `json:"metrics"`
		}
		flag := "-4"
		if fam == "inet6" {
			flag = "-6"
		}
		if err := json.Unmarshal(run(t, "ip", flag, "-d", "-j", "route", "show", "table", "all"), &routes); err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if incidental(r.Dev) {
				continue
			}
			tbl, ok := tables[r.Table]
			if !ok {
				tbl, _ = strconv.Atoi(r.Table)
			}
			rt := Route{Family: fam, Dst: r.Dst, Table: tbl, Type: r.Type, Protocol: r.Protocol, Dev: r.Dev,
				Gateway: r.Gateway, Src: r.Prefsrc, Priority: r.Metric}
			if r.Scope != "global" && r.Scope != "universe" {
				rt.Scope = r.Scope
			}
			for _, m := range r.Metrics {
				for k, v := range m {
					n, _ := v.(float64)
					switch k {
					case "initcwnd":
						rt.InitCwnd = int(n)
					case "initrwnd":
						rt.InitRwnd = int(n)
					case "quickack":
						rt.QuickACK = int(n)
					case "congctl":
						rt.Congctl = fmt.Sprint(v)
					}
				}
			}
			nl.RouteList = append(nl.RouteList, rt)
		}
	}
	SortRoutes(nl.RouteList)
	return nl
}

// ethtoolAliases maps ethtool -k's legacy display names to the kernel's
// feature names; aggregate lines with indented sub-features are skipped.
var ethtoolAliases = map[string]string{
	"rx-checksumming": "rx-checksum", "generic-segmentation-offload": "tx-generic-segmentation",
	"generic-receive-offload": "rx-gro", "large-receive-offload": "rx-lro", "rx-vlan-offload": "rx-vlan-hw-parse",
	"tx-vlan-offload": "tx-vlan-hw-insert", "ntuple-filters": "rx-ntuple-filter", "receive-hashing": "rx-hashing",
}

func toolEthtool(iface string) *Ethtool {
	info, err := exec.Command("ethtool", "-i", iface).Output()
	if err != nil {
		return nil
	}
	kv := func(b []byte) map[string]string {
		m := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok {
				m[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		return m
	}
	i := kv(info)
	e := &Ethtool{Driver: i["driver"], Version: i["version"], Firmware: i["firmware-version"], BusInfo: i["bus-info"],
		Errors: map[string]string{}}
	num := func(s string) uint32 { n, _ := strconv.ParseUint(s, 10, 32); return uint32(n) }
	if out, err := exec.Command("ethtool", "-l", iface).Output(); err == nil {
		max, cur, _ := strings.Cut(string(out), "Current hardware settings:")
		m, c := kv([]byte(max)), kv([]byte(cur))
		e.Channels = &Channels{MaxRx: num(m["RX"]), MaxTx: num(m["TX"]), MaxOther: num(m["Other"]), MaxCombined: num(m["Combined"]),
			Rx: num(c["RX"]), Tx: num(c["TX"]), Other: num(c["Other"]), Combined: num(c["Combined"])}
	} else {
		e.Errors["channels"] = "operation not supported"
	}
	if out, err := exec.Command("ethtool", "-g", iface).Output(); err == nil {
		max, cur, _ := strings.Cut(string(out), "Current hardware settings:")
		m, c := kv([]byte(max)), kv([]byte(cur))
		e.Rings = &Rings{RxMax: num(m["RX"]), TxMax: num(m["TX"]), Rx: num(c["RX"]), Tx: num(c["TX"])}
	} else {
		e.Errors["rings"] = "operation not supported"
	}
	if out, err := exec.Command("ethtool", "-c", iface).Output(); err == nil {
		e.Coalesce = map[string]uint32{}
		for k, v := range kv(out) {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && !strings.Contains(k, " ") {
				e.Coalesce[k] = uint32(n)
			}
		}
		if strings.Contains(string(out), "Adaptive RX: on") {
			e.Coalesce["adaptive-rx"] = 1
		} else if strings.Contains(string(out), "Adaptive RX: off") {
			e.Coalesce["adaptive-rx"] = 0
		}
	} else {
		e.Errors["coalesce"] = "operation not supported"
	}
	if out, err := exec.Command("ethtool", "-k", iface).Output(); err == nil {
		e.Features = map[string]bool{}
		lines := strings.Split(string(out), "\n")
		for j, l := range lines {
			k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
			if !ok || strings.HasPrefix(l, "Features") {
				continue
			}
			if !strings.HasPrefix(l, "\t") && j+1 < len(lines) && strings.HasPrefix(lines[j+1], "\t") {
				continue // aggregate of the indented lines below
			}
			if a, ok := ethtoolAliases[k]; ok {
				k = a
			}
			e.Features[k] = strings.HasPrefix(v, "on")
		}
	}
	if out, err := exec.Command("ethtool", "-S", iface).Output(); err == nil {
		e.Stats = map[string]uint64{}
		for k, v := range kv(out) {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				e.Stats[k] = n
			}
		}
	}
	if len(e.Errors) == 0 {
		e.Errors = nil
	}
	return e
}
