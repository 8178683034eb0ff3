#!/bin/sh
# lowlat's postinst (deb: configure [OLD-VERSION], abort-*) and %post (rpm:
# 1 install, 2 upgrade).
#
# Install starts nothing and enables nothing: lowlat-boot.service and
# lowlat-reassert.timer are enabled by the apply that needs them (it writes
# its own copy to /etc/systemd/system), lowlat-monitor.service waits for the
# operator's /etc/lowlat/monitor.toml ('systemctl enable --now
# lowlat-monitor') and each lowlat-autorate@IFACE for its policy. Installing
# or upgrading never touches the host's tuning or the journal in
# /var/lib/lowlat.
#
# An upgrade restarts the daemons that run, so they run the new binary: the
# monitor and every autorate instance, and only those that run (try-restart),
# as dh_installsystemd's --no-start with restart after upgrade does. Debian
# restarts here, once the new files are in place; rpm in %postun (the
# package being replaced runs it, as %systemd_postun_with_restart does).
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	case "$1" in
	configure | abort-upgrade | abort-deconfigure | abort-remove)
		# OLD-VERSION is set on an upgrade (and a reinstall), empty on a
		# first install. deb-systemd-invoke asks policy-rc.d first.
		if [ -n "$2" ]; then
			if command -v deb-systemd-invoke >/dev/null 2>&1; then
				deb-systemd-invoke try-restart lowlat-monitor.service 'lowlat-autorate@*.service' >/dev/null || true
			else
				systemctl try-restart lowlat-monitor.service 'lowlat-autorate@*.service' >/dev/null 2>&1 || true
			fi
		fi
		;;
	esac
fi
exit 0
