#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: rollback
short_description: Roll back what lowlat applied on the host
version_added: "0.1.0"
description:
  - Runs C(lowlat rollback) on the host; every knob is restored to the value
    journaled before the change, in reverse order, and read back.
  - Without options, the newest transaction in force; with O(all), every one.
  - A host with nothing in force reports C(changed=false).
  - Check mode reads C(lowlat status) and changes nothing. It names the
    transaction as the real run would, and fails where the real run would
    (a prefix that matches none or more than one, a transaction that is not
    the newest), or when C(lowlat status) fails.
  - Check mode sees only the transactions in force. A prefix that also
    matches one no longer in force is refused as ambiguous by the real run
    alone.
options:
  txn:
    description:
      - Roll back this transaction (it must be the newest in force).
      - Its id, or a unique prefix of at least four characters of it.
    type: str
  all:
    description: Roll back every transaction in force, newest first.
    type: bool
    default: false
extends_documentation_fragment:
  - lowlat.lowlat.lowlat
notes:
  - Needs root on the host.
  - Supports check mode and diff mode.
author:
  - lowlat maintainers (@lowlat)
'''

EXAMPLES = r'''
- name: Undo every lowlat change on the fleet
  lowlat.lowlat.rollback:
    all: true
'''

RETURN = r'''
txn:
  description: The transaction rolled back, null when nothing was in force.
  returned: always
  type: str
changes:
  description: The knobs restored, each with knob, before (the applied value) and after (the restored one).
  returned: always
  type: list
  elements: dict
rolled_back:
  description: Every transaction this run ended.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.lowlat.lowlat.plugins.module_utils.lowlat import (
    COMMON_ARGS, find_txn, knob_diff, run_lowlat, status)


def check(module):
    """What the real run would roll back, from lowlat status; changes nothing."""
    active = [a['id'] for a in status(module).get('active', [])]
    if module.params['all']:
        targets = active[::-1]
    elif module.params['txn']:
        txn, err = find_txn(active, module.params['txn'])
        if err:
            module.fail_json(msg='rollback: ' + err)
        if txn != active[-1]:
            module.fail_json(msg='rollback: transaction %s is not the newest (%s is applied on top of it): '
                             'roll that back first, or use all' % (txn, active[-1]))
        targets = [txn]
    else:
        targets = active[-1:]
    module.exit_json(changed=bool(targets), txn=targets[0] if targets else None, changes=[], rolled_back=targets)


def main():
    argument_spec = dict(
        txn=dict(type='str'),
        all=dict(type='bool', default=False),
    )
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(argument_spec=argument_spec, mutually_exclusive=[('txn', 'all')], supports_check_mode=True)
    if module.check_mode:
        check(module)
    args = ['rollback', '--json']
    if module.params['all']:
        args.append('--all')
    if module.params['txn']:
        args += ['--txn', module.params['txn']]
    rc, data, err = run_lowlat(module, args)
    result = dict(changed=bool(data.get('changed')), txn=data.get('txn'), changes=data.get('changes') or [], rolled_back=data.get('rolled_back') or [])
    if module._diff:
        result['diff'] = knob_diff(result['changes'])
    if rc != 0:
        module.fail_json(msg=err or 'lowlat rollback: exit %d' % rc, rc=rc, failed_knobs=data.get('failed'), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
