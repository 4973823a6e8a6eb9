// The host agent as the pages show it, in a real browser against a real server. A host agent is
// scripted over its HTTP API here (enrol, heartbeats): the real agent binary is driven end to end
// in tests/agent. Covered: SSH keys on the account page (a DSA key refused beside its field, an
// ed25519 key listed with ssh-keygen's fingerprint, removed); the provider's sell page showing the
// agent online and why its ask is off the book (the host reports 4 of 8 GPUs), then back; a market
// buy with a container image through the market page, and the SSH connection line on the lease
// once the agent runs it. Screenshots on desktop and phone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, waitForData, unexpected, signUp, useServerAndBrowser, logIn, scriptedAgent, accountTab } from './lib/helpers.mjs';

const env = useServerAndBrowser();

const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj grace@laptop';
const FINGERPRINT = 'SHA256:xkh9ZCNYIFG9N7w9WVXvCkhBxKOYRyDU24Im6DZ8cqw';

test('SSH keys on the account page: refused with the reason beside the field, listed, removed', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await signUp(page, username('kim'));
    await accountTab(page, 'ssh-keys');
    assert.match(await page.locator('#ssh-key-list').innerText(), /No keys yet/);
    await page.fill('#ssh-key-public', 'ssh-dss AAAAB3NzaC1kc3MAAACBAP');
    await page.click('#ssh-key-submit');
    await page.waitForFunction(() => document.querySelector('#err-ssh-key-public')?.textContent.length > 0);
    assert.match(await page.locator('#err-ssh-key-public').innerText(), /DSA is not accepted/);
    assert.equal(await page.locator('#ssh-key-public').getAttribute('aria-invalid'), 'true');
    await page.fill('#ssh-key-public', KEY);
    await page.click('#ssh-key-submit');
    await page.locator('#ssh-key-list table').waitFor();
    const row = await page.locator('#ssh-key-list tbody tr').first().innerText();
    assert.match(row, /grace@laptop/);
    assert.match(row, /ssh-ed25519 \(256 bits\)/);
    assert.ok(row.includes(FINGERPRINT), row);
    // The same key twice: a conflict, said beside the field.
    await page.fill('#ssh-key-public', KEY);
    await page.click('#ssh-key-submit');
    await page.waitForFunction(() => document.querySelector('#err-ssh-key-public')?.textContent.length > 0);
    assert.match(await page.locator('#err-ssh-key-public').innerText(), /already on your account/);
    await page.locator('#ssh-keys').scrollIntoViewIfNeeded();
    await screenshot(page, 'account-ssh-keys-desktop');
    await page.click('#ssh-key-list button:has-text("Remove")');
    await page.waitForFunction(() => /No keys yet/.test(document.querySelector('#ssh-key-list')?.textContent || ''));
    assert.deepEqual(unexpected(problems, ['/v1/ssh-keys', 'status of 400', 'status of 409']), []);
  } finally {
    await context.close();
  }
});

test('the sell page shows the agent and why the ask is off the book; a lease shows its SSH line', async () => {
  // The provider's machine and ask, by API; its host enrolled by a scripted agent that first
  // reports 4 of the 8 listed GPUs.
  const providerName = username('pat');
  const provider = await env.api.user(providerName, ['provider']);
  const until = new Date(Date.now() + 30 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  const m = await env.api.call('POST', '/v1/machines', { gpu: 'H100 SXM', gpus: 8, region: 'IAD-1', vcpus: 64, ram_gb: 512, disk_gb: 4000 }, provider);
  await env.api.call('POST', '/v1/asks', { machine_id: m.id, price_usd_per_gpu_hour: '1.000', min_gpus: 1, available_until: until }, provider);
  const token = await env.api.call('POST', `/v1/machines/${m.id}/enrolment-tokens`, {}, provider);
  const enrolled = await env.api.call('POST', '/v1/agent/enroll', { token: token.token, hostname: 'gpu-e2e' });
  const agent = scriptedAgent(env.api, enrolled.credential);
  await agent.beat(4);

  const seller = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await logIn(seller.page, providerName);
    await seller.page.goto('/sell/');
    await seller.page.waitForSelector('#sell-provider:not([hidden])');
    await waitForData(seller.page);
    const row = seller.page.locator('#machines tbody tr').first();
    assert.match(await row.innerText(), /agent online/);
    assert.match(await row.innerText(), /measured: 4 × NVIDIA H100 80GB HBM3/);
    assert.match(await row.innerText(), /64\s*measured: \d+/, 'vCPUs: listed and measured');
    assert.match(await row.innerText(), /4,?000 GB\s*measured: 7,?680 GB \(7,?000 GB free\)/, 'disk: listed and measured');
    assert.match(await row.innerText(), /the host reports 4 GPUs .* but the listing says 8 x H100 SXM/);
    assert.match(await row.innerText(), /held off the book/);
    await screenshot(seller.page, 'sell-agent-held-desktop');
    await seller.page.setViewportSize({ width: 390, height: 844 });
    await screenshot(seller.page, 'sell-agent-held-phone');
    await seller.page.setViewportSize({ width: 1366, height: 900 });
    // All 8 GPUs reported: the ask is back on the book.
    await agent.beat(8);
    await seller.page.reload();
    await waitForData(seller.page);
    assert.match(await seller.page.locator('#machines tbody tr').first().innerText(), /as listed/);
    // Revoked below: held with the reason, until it is enrolled again.
    // Enrolling another host shows the command to run, with this server's address.
    await seller.page.click('#machines button:has-text("Revoke")');
    await seller.page.click('#machines button:has-text("Confirm revoke")');
    await seller.page.waitForFunction(() => /agent revoked/.test(document.querySelector('#machines tbody tr')?.textContent || ''));
    assert.match(await seller.page.locator('#machines tbody tr').first().innerText(), /held: the host's agent was disconnected/);
    await seller.page.click('#machines button:has-text("Enrol again")');
    // The command sits under its machine, with a Copy button (issue 29), and stays there when the
    // table refreshes.
    const enrol = seller.page.locator(`#machines [data-testid="enrol-${m.id}"]`);
    await enrol.waitFor();
    assert.match(await enrol.locator('code.connection-line').innerText(), new RegExp(`^gpuhub agent enroll --server ${env.server.url} --token ghe_[0-9a-f]{64}$`));
    assert.equal(await enrol.locator('button').innerText(), 'Copy');
    assert.equal(await enrol.locator('button').getAttribute('aria-label'), `Copy the enrol command of machine #${m.id}`);
    assert.deepEqual(unexpected(seller.problems), []);
  } finally {
    await seller.context.close();
  }
  // The revoked host enrols again and reports all its GPUs.
  const again = await env.api.call('POST', `/v1/machines/${m.id}/enrolment-tokens`, {}, provider);
  const host = scriptedAgent(env.api, (await env.api.call('POST', '/v1/agent/enroll', { token: again.token })).credential);
  await host.beat(8);

  // A customer buys a GPU through the market page, naming a container image.
  const customerName = username('gus');
  const customer = await env.api.user(customerName, ['customer']);
  await env.api.fund(customer, '50.00');
  await env.api.call('POST', '/v1/ssh-keys', { public_key: KEY }, customer);
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await logIn(page, customerName);
    await page.goto('/market/');
    await page.waitForSelector('#bid-form:not([hidden])');
    await page.click('[role="tab"][data-gpu="H100 SXM"]');
    await waitForData(page);
    await page.check('input[name="order"][value="market"]');
    await page.fill('#bid-gpus', '1');
    await page.selectOption('#bid-image-choice', 'custom');
    await page.fill('#bid-image', 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime');
    await page.click('#bid-submit');
    await page.locator('#bid-result .alert-ok').waitFor();
    const filled = await page.locator('#bid-result').innerText();
    const lease = /Filled: lease #(\d+)/.exec(filled)?.[1];
    assert.ok(lease, filled);
    assert.match(filled, /1 × H100 SXM at \$1\.000\/GPU-h/);
    await page.locator('#leases table').waitFor();
    assert.match(await page.locator('#leases tbody tr').first().innerText(), /Waiting for host/);
    // Not billed until the host runs it: the lease waits for the host, its first hour held.
    const held = await env.api.call('GET', `/v1/leases/${lease}`, undefined, customer);
    assert.equal(held.billing, 'provisioning');
    assert.equal(held.hours_paid, 0);
    assert.ok(Number(held.held) >= 1, held.held);

    // The host's agent is told to run it (the image, the GPU by UUID, the key), and reports it up.
    const desired = await host.beat(8);
    const w = desired.workloads.find((x) => x.id === `lease-${lease}`);
    assert.ok(w, JSON.stringify(desired));
    assert.equal(w.image, 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime');
    assert.deepEqual(w.gpu_uuids, ['GPU-e2e-0']);
    assert.deepEqual(w.ssh_authorized_keys, [KEY]);
    await host.beat(8, [{ id: w.id, state: 'running', ssh_port: 40001 }]);
    const billed = await env.api.call('GET', `/v1/leases/${lease}`, undefined, customer);
    assert.equal(billed.billing, 'running');
    assert.equal(billed.hours_paid, 1, 'billed from the running report');
    await page.reload();
    await page.locator('#leases table').waitFor();
    const row = await page.locator('#leases tbody tr').first().innerText();
    assert.ok(row.includes('ssh -p 40001 root@198.51.100.7'), row);
    await page.locator('#leases-card').scrollIntoViewIfNeeded();
    await screenshot(page, 'market-lease-connection-desktop');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'market-lease-connection-phone');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('a term rental shows the SSH line its node agent reports and the downtime credit', async () => {
  const customerName = username('rita');
  const customer = await env.api.user(customerName, ['customer']);
  await env.api.fund(customer, '700.00');
  await env.api.call('POST', '/v1/ssh-keys', { public_key: KEY }, customer);
  const rental = await env.api.call('POST', '/v1/rentals', { gpu: 'H100 SXM', count: 1, term: 'week' }, customer);
  // The admin enrols the agent of the rental's node (a demo node of 8 H100 SXM).
  const admin = await env.server.adminToken();
  const token = await env.api.call('POST', `/v1/admin/nodes/${rental.node_id}/enrolment-tokens`, {}, admin);
  const node = scriptedAgent(env.api, (await env.api.call('POST', '/v1/agent/enroll', { token: token.token, hostname: 'node-e2e' })).credential);
  const desired = await node.beat(8);
  const w = desired.workloads.find((x) => x.id === `rental-${rental.id}`);
  assert.ok(w, JSON.stringify(desired));
  assert.deepEqual(w.ssh_authorized_keys, [KEY]);
  assert.deepEqual(w.volumes, [{ name: `rental-${rental.id}-${rental.cards[0]}`, slot: rental.cards[0] }]);
  // Pulling: the rental page shows the steps as they happen.
  await node.beat(8, [{ id: w.id, state: 'pulling', detail: 'pulling nvidia/cuda:12.4.1-base-ubuntu22.04' }]);
  const pulling = await env.api.call('GET', `/v1/rentals/${rental.id}`, undefined, customer);
  assert.ok(['provisioning', 'active'].includes(pulling.state), pulling.state);  // per [rentals] provisioning
  assert.equal(pulling.provisioning.step, 'pulling');
  assert.deepEqual(pulling.provisioning.steps.map((x) => x.step), ['waiting_for_host', 'pulling']);
  assert.equal(pulling.image, w.image);
  {
    const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
    try {
      await logIn(page, customerName);
      const item = page.locator(`#rental-${rental.id}`);
      await item.locator('.steps').waitFor();
      assert.equal(await item.locator('.step[aria-current="step"]').getAttribute('data-step'), 'pulling');
      assert.match(await item.locator('.steps').getAttribute('aria-label'), new RegExp(`rental #${rental.id}`));
      assert.ok((await item.locator('.image').innerText()).includes(w.image));
      assert.deepEqual(unexpected(problems), []);
    } finally {
      await context.close();
    }
  }
  await node.beat(8, [{ id: w.id, state: 'running', ssh_port: 40002 }]);
  // The node is silent for 2 h, then back: 475.00 / 168 h x 2 h is credited.
  await env.server.advanceClock(7200);
  await node.beat(8, [{ id: w.id, state: 'running', ssh_port: 40002 }]);

  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await logIn(page, customerName);
    const item = page.locator(`#rental-${rental.id}`);
    await item.locator('.connect').waitFor();
    assert.ok((await item.locator('.connect').innerText()).includes('ssh -p 40002 root@198.51.100.7'));
    assert.match(await item.locator('.downtime').innerText(), /\$5\.65 credited: the node was offline 2\.00 h/);
    await item.scrollIntoViewIfNeeded();
    await screenshot(page, 'account-rental-connection-desktop');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});
