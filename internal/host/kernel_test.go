package host

import "testing"

func TestQdiscSupport(t *testing.T) {
	mods := func(present bool, files ...string) moduleIndex {
		m := moduleIndex{present: present, files: map[string]bool{}, builtin: map[string]bool{}, loaded: map[string]bool{}}
		for _, f := range files {
			m.files[f] = true
		}
		return m
	}
	k610 := Kernel{Major: 6, Minor: 1}
	tests := []struct {
		name   string
		kernel Kernel
		mods   moduleIndex
		inUse  map[string]bool
		want   map[string]Support
	}{
		{
			name:   "config y, m with .ko, m without .ko, not set",
			kernel: Kernel{Major: 5, Minor: 14, Config: map[string]string{"CONFIG_NET_SCHED": "y", "CONFIG_NET_SCH_FQ_CODEL": "y", "CONFIG_NET_SCH_FQ": "m", "CONFIG_NET_SCH_CAKE": "m", "CONFIG_NET_SCH_NETEM": "n", "CONFIG_NET_SCH_INGRESS": "m"}},
			mods:   mods(true, "sch_fq", "sch_ingress"),
			want: map[string]Support{"fq_codel": Builtin, "fq": Module, "cake": Absent, "netem": Absent, "hfsc": Absent,
				"ingress": Module, "clsact": Module, "pfifo_fast": Builtin, "mq": Builtin, "pfifo": Builtin, "bfifo": Builtin},
		},
		{
			name:   "config m without a module tree trusts the config",
			kernel: Kernel{Major: 6, Minor: 1, Config: map[string]string{"CONFIG_NET_SCHED": "y", "CONFIG_NET_SCH_CAKE": "m"}},
			mods:   mods(false),
			want:   map[string]Support{"cake": Module, "netem": Absent},
		},
		{
			name:   "no config, module tree decides",
			kernel: k610,
			mods: func() moduleIndex {
				m := mods(true, "sch_fq_codel")
				m.builtin["sch_htb"] = true
				return m
			}(),
			want: map[string]Support{"fq_codel": Module, "htb": Builtin, "cake": Absent, "pfifo": Builtin},
		},
		{
			name:   "nothing known",
			kernel: k610,
			mods:   mods(false),
			want:   map[string]Support{"fq_codel": Unknown, "cake": Unknown, "pfifo": Unknown, "mq": Builtin},
		},
		{
			name:   "nothing known on an old kernel",
			kernel: Kernel{Major: 4, Minor: 9},
			mods:   mods(false),
			want:   map[string]Support{"cake": Absent, "clsact": Builtin, "fq": Unknown},
			inUse:  map[string]bool{"clsact": true},
		},
		{
			name:   "in use beats a config that says otherwise",
			kernel: Kernel{Major: 6, Minor: 1, Config: map[string]string{"CONFIG_NET_SCH_FQ_CODEL": "n"}},
			mods:   mods(false),
			inUse:  map[string]bool{"fq_codel": true},
			want:   map[string]Support{"fq_codel": Builtin},
		},
		{
			name:   "loaded module",
			kernel: k610,
			mods: func() moduleIndex {
				m := mods(false)
				m.loaded["sch_netem"] = true
				return m
			}(),
			want: map[string]Support{"netem": Module},
		},
		{
			name:   "clsact needs 4.5 even with sch_ingress",
			kernel: Kernel{Major: 3, Minor: 10, Config: map[string]string{"CONFIG_NET_SCH_INGRESS": "m"}},
			mods:   mods(true, "sch_ingress"),
			want:   map[string]Support{"ingress": Module, "clsact": Absent},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := qdiscSupport(&tt.kernel, tt.mods, tt.inUse)
			if len(got) != len(QdiscKinds) {
				t.Errorf("%d kinds, want %d", len(got), len(QdiscKinds))
			}
			for kind, want := range tt.want {
				if got[kind] != want {
					t.Errorf("%s = %s, want %s", kind, got[kind], want)
				}
			}
		})
	}
}

func TestCongestionSupport(t *testing.T) {
	tests := []struct {
		k    Kernel
		name string
		want Support
	}{
		{Kernel{CongestionAvailable: []string{"reno", "cubic"}, CongestionModules: []string{"bbr"}}, "bbr", Module},
		{Kernel{CongestionAvailable: []string{"reno", "bbr"}}, "bbr", Builtin},
		{Kernel{Major: 3, Minor: 10}, "bbr", Absent},
		{Kernel{Major: 6, Minor: 1}, "bbr", Unknown},
		{Kernel{Config: map[string]string{"CONFIG_TCP_CONG_BBR": "m"}}, "bbr", Module},
		{Kernel{Config: map[string]string{"CONFIG_TCP_CONG_BBR": "m"}, ModulesDir: "/lib/modules/x"}, "bbr", Absent},
		{Kernel{Config: map[string]string{}}, "reno", Builtin},
	}
	for _, tt := range tests {
		if got := tt.k.CongestionSupport(tt.name); got != tt.want {
			t.Errorf("%+v CongestionSupport(%s) = %s, want %s", tt.k, tt.name, got, tt.want)
		}
	}
}
