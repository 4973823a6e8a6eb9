// Where a lease's container stands, as its host's agent reports it (the lease's "provisioning":
// waiting for host -> pulling the image -> starting (sshd not answering yet) -> ready), and the
// SSH line with a Copy button once it is ready. Times are the server's, in the reader's zone.
import { h, copyableCommand } from './dom.js';
import { timestamp } from './format.js';

const STEPS = [
  ['waiting_for_host', 'Waiting for host'],
  ['pulling', 'Pulling image'],
  ['starting', 'Starting'],
  ['ready', 'Ready'],
];

// Whether the page should look again soon: an active lease whose container is not ready yet.
export function provisioning(l) {
  if (l.status !== 'active') return false;
  const step = l.provisioning && l.provisioning.step;
  return step !== 'ready' && step !== 'simulated' && !(l.connection && l.connection.ssh);
}

// The steps as an ordered list: done, current (aria-current="step") and to come; a failure with
// the agent's words.
export function provisioningSteps(l, what = 'lease') {
  const p = l.provisioning || { step: 'waiting_for_host', steps: [] };
  const at = new Map();
  for (const s of p.steps || []) at.set(s.step, s.at);  // the latest time of each
  const current = STEPS.findIndex(([key]) => key === p.step);
  const failed = p.step === 'failed';
  // A failure is shown after the last step that happened.
  const reached = current >= 0 ? current : Math.max(...STEPS.map(([key], i) => (at.has(key) ? i : 0)));
  const items = STEPS.map(([key, label], i) => {
    const state = i < reached || (failed && i === reached) ? 'done' : i === reached && !failed ? 'current' : 'todo';
    return h(
      'li',
      { class: `step step-${state}`, 'aria-current': state === 'current' ? 'step' : null, dataset: { step: key } },
      label,
      at.has(key) ? h('span', { class: 'hint' }, ` ${timestamp(at.get(key))}`) : ''
    );
  });
  const list = h('ol', { class: 'steps', 'aria-label': `Provisioning of ${what} #${l.id}` }, items);
  if (failed) {
    return h('div', null, list, h('div', { class: 'field-error' }, 'Failed to start' + (p.detail ? `: ${p.detail}` : '')));
  }
  if (p.step === 'starting' && p.detail) return h('div', null, list, h('div', { class: 'hint' }, p.detail));
  return list;
}

// The lease's Connect cell: the SSH line once ready, else the steps.
export function leaseConnection(l) {
  const c = l.connection || {};
  if (l.status !== 'active') return c.state === 'stopped' ? h('span', { class: 'muted' }, 'removed') : '';
  if (c.ssh) return copyableCommand(c.ssh, `the SSH command of lease #${l.id}`);
  if (c.state === 'no_agent') return h('span', { class: 'muted' }, 'no agent on this machine yet');
  if (c.state === 'simulated') return h('span', { class: 'muted' }, 'simulated host (demo): no real machine to connect to');
  return provisioningSteps(l);
}
