#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: canary_judge
short_description: Judge canary hosts against control hosts from Prometheus with lowlat canary judge
version_added: "1.1.0"
description:
  - Runs C(lowlat canary judge --json) on the node the task runs on, which
    reads the lowlat monitors' series from Prometheus and compares the canary
    hosts with the control hosts over the window (see docs/canary.md).
  - Run it on the control node, once per rollout (C(delegate_to=localhost)
    and C(run_once=true)); the managed hosts need not reach Prometheus.
  - The task fails only when the judge could not judge as asked, a usage
    error (lowlat's exit 2 - a malformed selector, an unknown metric, an
    empty group, a bad URL or SLO), with lowlat's one line as its message,
    or any other error of lowlat (exit 1), or when the HTML page asked for
    (O(html)) could not be written, whatever the verdict.
  - O(mode=validate) checks every input as a judgement would (C(--validate)),
    and O(mode=hosts) lists the hosts each selector selects (C(--list-hosts)),
    so that a playbook can refuse bad input, and selectors that miss the
    hosts it changes, before it changes anything.
  - A verdict of C(fail), C(marginal) or C(inconclusive) does B(not) fail
    the task. The verdict is returned, and the playbook decides what to do
    with it (the collection's C(canary) playbook rolls the canary back and
    stops on anything but C(pass)).
  - The judge only reads Prometheus, so it reports C(changed=false) and runs
    in check mode too, where it writes no HTML page.
options:
  mode:
    description:
      - C(judge) judges the canary (C(lowlat canary judge --json)).
      - C(validate) checks every option as a judgement would, and that O(html)
        can be written, and queries nothing (C(--validate)); the task fails
        on bad input with lowlat's one line.
      - C(hosts) makes the same checks, then asks Prometheus which hosts
        each selector selects (those with a judged metric's series over the
        last O(window); C(--list-hosts --json)), returned as RV(canary_hosts)
        and RV(control_hosts); the task fails when Prometheus cannot answer.
    type: str
    choices: [judge, validate, hosts]
    default: judge
  prometheus:
    description:
      - Prometheus's URL, e.g. C(http://prometheus:9090); credentials in it
        (C(https://user:pass@prometheus)) authenticate the judge's requests.
      - Never returned or logged as given (C(no_log)) - lowlat's own
        messages and RV(result) show it redacted (C(user:xxxxx@)). A URL
        without credentials, a query or a fragment (nothing lowlat hides) is
        shown as is.
    type: str
    required: true
  canary:
    description:
      - The canary hosts' series, as PromQL label matchers, with or without
        braces, e.g. C(instance=~"10\\.1\\.0\\.(1|2):9431").
    type: str
    required: true
  control:
    description:
      - The control hosts' series, as PromQL label matchers. Hosts of the
        same role and region as the canary that the rollout has not touched.
    type: str
    required: true
  window:
    description:
      - The judged window, which ends at O(end), e.g. C(24h). The window
        before it is read too, to compare each host with itself.
    type: str
    required: true
  step:
    description:
      - The per-host step, e.g. C(5m) (lowlat's default is the window / 24).
        At least two scrape intervals; the window needs at least six steps.
    type: str
  end:
    description:
      - The end of the judged window, RFC 3339 or unix seconds, not in the future
        (lowlat's default is now less two O(scrape_interval)s, so that its last step is complete).
    type: str
  scrape_interval:
    description:
      - How often Prometheus scrapes the monitors, e.g. C(15s) (lowlat's default).
        A O(step) under two of them is bad input.
    type: str
  metrics:
    description:
      - The metrics to judge (lowlat's default is p99, jitter and loss) -
        p50, p90, p99, p999, jitter, loss, first_byte_p99, or any lowlat
        histogram as C(NAME) or C(NAME:pNN).
    type: list
    elements: str
  slo:
    description: SLO terms checked on the canary group, e.g. C(p99<=8ms,loss<=1%).
    type: str
  host_label:
    description: The label that names a host (lowlat's default is C(instance)).
    type: str
  html:
    description:
      - Also write the judge's self-contained HTML page to this file, on the node the task runs on.
      - Not written in check mode (O(mode=validate) still checks that it could be).
      - A page that could not be written fails the task, whatever the verdict.
    type: path
  timeout:
    description: How long the judge may wait for Prometheus, e.g. C(30s).
    type: str
extends_documentation_fragment:
  - lowlat.lowlat.lowlat.binary
notes:
  - Supports check mode (the judge only reads Prometheus; it changes nothing,
    and writes no HTML page).
  - Exit codes of C(lowlat canary judge) - 0 pass, 3 marginal, 4 fail,
    5 inconclusive, 2 usage, 1 other error (a pass whose HTML page could not
    be written among them); with C(--list-hosts), 5 when Prometheus cannot answer.
seealso:
  - name: lowlat canary judge
    description: The judge's method and its numbers (docs/canary.md).
    link: https://github.com/lowlat/lowlat/blob/main/docs/canary.md
author:
  - lowlat maintainers (@lowlat)
'''

EXAMPLES = r'''
- name: Before anything changes, check the judge's input
  lowlat.lowlat.canary_judge:
    mode: validate
    prometheus: http://prometheus.example.net:9090
    canary: 'instance=~"edge-(01|02):9431"'
    control: 'instance=~"edge-(0[3-9]|1[0-9]):9431"'
    window: 24h
    html: /srv/canary/edge.html
  delegate_to: localhost
  run_once: true

- name: And which hosts the selectors select
  lowlat.lowlat.canary_judge:
    mode: hosts
    prometheus: http://prometheus.example.net:9090
    canary: 'instance=~"edge-(01|02):9431"'
    control: 'instance=~"edge-(0[3-9]|1[0-9]):9431"'
    window: 24h
  delegate_to: localhost
  run_once: true
  register: selected

- name: Judge the canary against the hosts left alone
  lowlat.lowlat.canary_judge:
    prometheus: http://prometheus.example.net:9090
    canary: 'instance=~"edge-(01|02):9431"'
    control: 'instance=~"edge-(0[3-9]|1[0-9]):9431"'
    window: 24h
    slo: p99<=8ms,loss<=1%
  delegate_to: localhost
  run_once: true
  register: judged

- name: Stop unless the canary passed
  ansible.builtin.fail:
    msg: "canary {{ judged.verdict }} (score {{ judged.score }}): {{ judged.why }}"
  when: judged.verdict != 'pass'
  run_once: true
'''

RETURN = r'''
verdict:
  description: The judge's verdict - pass, marginal, fail or inconclusive.
  returned: with O(mode=judge), on success and when the HTML page could not be written
  type: str
  sample: pass
score:
  description: The judge's score, 0 to 100.
  returned: success, with O(mode=judge)
  type: float
  sample: 100
why:
  description: The verdict's reason, one line.
  returned: success, with O(mode=judge)
  type: str
metrics:
  description:
    - Each metric's classification (pass, marginal, fail, inconclusive) with
      its effect, confidence interval, p-value and the groups' medians, as
      lowlat's JSON has it.
  returned: success, with O(mode=judge)
  type: list
  elements: dict
slo:
  description: Each SLO term, its value on the canary group and whether it held (empty without O(slo)).
  returned: success, with O(mode=judge)
  type: list
  elements: dict
canary_hosts:
  description:
    - The canary hosts the judge found (values of the host label); with O(mode=hosts),
      the hosts the canary selector selects.
  returned: success, with O(mode=judge) or O(mode=hosts)
  type: list
  elements: str
control_hosts:
  description: The control hosts the judge found, or with O(mode=hosts) that the control selector selects.
  returned: success, with O(mode=judge) or O(mode=hosts)
  type: list
  elements: str
html_error:
  description: Why the HTML page could not be written (the task then fails).
  returned: when O(html) could not be written
  type: str
window:
  description: The window judged - start, end and step.
  returned: success, with O(mode=judge)
  type: dict
rc:
  description: lowlat's exit code - 0 pass, 3 marginal, 4 fail, 5 inconclusive (0 with O(mode=validate) or O(mode=hosts)).
  returned: always
  type: int
result:
  description: lowlat canary judge's whole JSON result.
  returned: success, with O(mode=judge)
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.lowlat.lowlat.plugins.module_utils.lowlat import (
    COMMON_ARGS, run_lowlat)

# lowlat canary judge's exit code for each verdict; any other is an error.
VERDICT_EXITS = {0: 'pass', 3: 'marginal', 4: 'fail', 5: 'inconclusive'}

# The flag of each mode but judge.
MODE_FLAGS = {'validate': ['--validate'], 'hosts': ['--list-hosts', '--json']}


def judge_args(module):
    """lowlat canary judge's command line for the module's options."""
    p = module.params
    args = ['canary', 'judge', '--prometheus', p['prometheus'], '--canary', p['canary'],
            '--control', p['control'], '--window', p['window']]
    for opt in ('step', 'end', 'slo', 'host_label', 'timeout', 'scrape_interval'):
        if p[opt] is not None:
            args += ['--' + opt.replace('_', '-'), str(p[opt])]
    # Check mode writes nothing, not even on the controller; validate only
    # checks that the page could be written.
    if p['html'] is not None and (p['mode'] == 'validate' or not module.check_mode):
        args += ['--html', p['html']]
    for m in p['metrics'] or []:
        args += ['--metric', m]
    return args + MODE_FLAGS.get(p['mode'], ['--json'])


def show_prometheus(module):
    """Unmask a Prometheus URL that holds nothing lowlat hides.

    no_log masks the URL wherever it appears in the result: lowlat's
    redacted form of a URL with credentials differs from it and stays, but
    a URL without them is its own redacted form, and every message naming
    it ("prometheus ********: ...") would no longer say which Prometheus
    failed. lowlat hides a URL's userinfo, query and fragment; one without
    them ('@', '?', '#') is shown, in the invocation too.
    """
    url = module.params['prometheus']
    if not any(c in url for c in '@?#'):
        module.no_log_values.discard(url)


def first_line(err, rc):
    """lowlat's one line: the first line of its stderr."""
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    return lines[0] if lines else 'lowlat canary judge: exit %d' % rc


def main():
    argument_spec = dict(
        mode=dict(type='str', default='judge', choices=['judge', 'validate', 'hosts']),
        # Its credentials (user:pass@) must appear in no result: no_log
        # keeps the value out of invocation.module_args and masks it
        # wherever it appears (lowlat itself prints only its redacted form).
        prometheus=dict(type='str', required=True, no_log=True),
        canary=dict(type='str', required=True),
        control=dict(type='str', required=True),
        window=dict(type='str', required=True),
        step=dict(type='str'),
        end=dict(type='str'),
        metrics=dict(type='list', elements='str'),
        slo=dict(type='str'),
        host_label=dict(type='str'),
        html=dict(type='path'),
        timeout=dict(type='str'),
        scrape_interval=dict(type='str'),
    )
    argument_spec.update(COMMON_ARGS)
    del argument_spec['journal']
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    show_prometheus(module)
    mode = module.params['mode']
    rc, data, err = run_lowlat(module, judge_args(module), journal=False)
    if mode != 'judge':
        if rc != 0:
            # Bad input (2), or with hosts a Prometheus that cannot answer (5).
            module.fail_json(msg=first_line(err, rc), rc=rc, stderr=err)
        module.exit_json(
            changed=False,
            rc=rc,
            canary_hosts=(data.get('canary') or {}).get('hosts') or [],
            control_hosts=(data.get('control') or {}).get('hosts') or [],
        )
    verdict = dict(
        verdict=data.get('verdict', VERDICT_EXITS.get(rc)),
        score=data.get('score'),
        why=data.get('why', ''),
        metrics=data.get('metrics') or [],
        slo=data.get('slo') or [],
        canary_hosts=(data.get('canary') or {}).get('hosts') or [],
        control_hosts=(data.get('control') or {}).get('hosts') or [],
        window=data.get('window') or {},
        result=data,
    )
    if data.get('html_error'):
        # The page asked for is not there: a failure, whatever the verdict
        # (a pass exits 1 then), so that the playbook rolls the canary back.
        msg = first_line(err, rc) if err else 'lowlat canary judge: --html: %s' % data['html_error']
        module.fail_json(msg=msg, rc=rc, stderr=err, html_error=data['html_error'], **verdict)
    if rc not in VERDICT_EXITS:
        # A usage error (2) or another error (1): lowlat's one line says it.
        module.fail_json(msg=first_line(err, rc), rc=rc, stderr=err)
    # failed=False said outright: Ansible takes a result with a non-zero rc
    # and no failed for a failure, and a verdict is not one.
    module.exit_json(changed=False, failed=False, rc=rc, **verdict)


if __name__ == '__main__':
    main()
