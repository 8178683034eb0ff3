#!/bin/sh
# lowlat's postinst (deb: configure) and %post (rpm: 1 install, 2 upgrade).
#
# Only tell systemd that the package's units changed. Nothing is enabled and
# nothing is started: lowlat-boot.service and lowlat-reassert.timer are
# enabled by the apply that needs them (it writes its own copy to
# /etc/systemd/system), and lowlat-monitor.service waits for the operator's
# /etc/lowlat/monitor.toml ('systemctl enable --now lowlat-monitor').
# Installing or upgrading never touches the host's tuning or the journal in
# /var/lib/lowlat.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
