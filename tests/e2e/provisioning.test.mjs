// A lease's provisioning as the market page shows it, in a real browser against a real server,
// while a scripted host agent (its HTTP API, as tests/e2e/agent.test.mjs does) reports each step:
// waiting for host -> pulling -> starting (sshd not answering yet) -> ready with the SSH line and
// its Copy button. The page follows the steps without a reload. Screenshots on desktop and phone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, waitForData, unexpected, useServerAndBrowser, logIn, scriptedAgent } from './lib/helpers.mjs';

const env = useServerAndBrowser();

const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj grace@laptop';

test('a lease shows its provisioning steps as they happen, then the SSH line with a Copy button', async () => {
  const provider = await env.api.user(username('pia'), ['provider']);
  const until = new Date(Date.now() + 30 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  const m = await env.api.call('POST', '/v1/machines', { gpu: 'H100 SXM', gpus: 2, region: 'IAD-1', vcpus: 16, ram_gb: 128, disk_gb: 1000 }, provider);
  await env.api.call('POST', '/v1/asks', { machine_id: m.id, price_usd_per_gpu_hour: '1.000', min_gpus: 1, available_until: until }, provider);
  const token = await env.api.call('POST', `/v1/machines/${m.id}/enrolment-tokens`, {}, provider);
  const host = scriptedAgent(env.api, (await env.api.call('POST', '/v1/agent/enroll', { token: token.token })).credential, { hostname: 'gpu-prov', publicHost: '198.51.100.9', uuidPrefix: 'GPU-prov' });
  const beat = (workloads = []) => host.beat(2, workloads);
  await beat();

  const customerName = username('cleo');
  const customer = await env.api.user(customerName, ['customer']);
  await env.api.fund(customer, '50.00');
  await env.api.call('POST', '/v1/ssh-keys', { public_key: KEY }, customer);
  const bid = await env.api.call('POST', '/v1/bids', { gpu: 'H100 SXM', gpus: 1, market: true }, customer);
  assert.equal(bid.status, 'filled', JSON.stringify(bid));
  const workload = `lease-${bid.lease_id}`;

  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: env.server.url });
  try {
    await logIn(page, customerName);
    await page.goto('/market/');
    await page.locator('#leases table').waitFor();
    const steps = page.locator(`#leases ol[aria-label="Provisioning of lease #${bid.lease_id}"]`);
    const current = steps.locator('li[aria-current="step"]');
    await steps.waitFor();
    assert.deepEqual(await steps.locator('li').evaluateAll((items) => items.map((li) => li.dataset.step)), ['waiting_for_host', 'pulling', 'starting', 'ready']);
    assert.equal(await current.getAttribute('data-step'), 'waiting_for_host');

    // Each report shows on the page as it comes, without a reload.
    await beat([{ id: workload, state: 'pulling', detail: 'pulling nvidia/cuda:12.4.1-base-ubuntu22.04' }]);
    await steps.locator('li[aria-current="step"][data-step="pulling"]').waitFor();
    assert.match(await steps.locator('li[data-step="waiting_for_host"]').getAttribute('class'), /step-done/);
    await beat([{ id: workload, state: 'starting', ssh_port: 40001, detail: 'waiting for sshd to answer on port 40001' }]);
    await steps.locator('li[aria-current="step"][data-step="starting"]').waitFor();
    assert.match(await page.locator('#leases tbody tr').first().innerText(), /waiting for sshd to answer on port 40001/);
    assert.equal(await page.locator('#leases tbody tr').first().locator('.connection-line').count(), 0, 'no SSH line before sshd answers');
    await screenshot(page, 'market-lease-provisioning-desktop');

    await beat([{ id: workload, state: 'running', ssh_port: 40001 }]);
    const line = page.locator('#leases tbody tr').first().locator('.connection-line');
    await line.waitFor();
    assert.equal(await line.innerText(), 'ssh -p 40001 root@198.51.100.9');
    const copy = page.locator(`button[aria-label="Copy the SSH command of lease #${bid.lease_id}"]`);
    await copy.click();
    // The button then says Copied, and its accessible name too.
    const copied = page.locator(`button[aria-label="Copied: the SSH command of lease #${bid.lease_id}"]`);
    await copied.waitFor();
    assert.equal(await copied.innerText(), 'Copied');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'ssh -p 40001 root@198.51.100.9');
    await screenshot(page, 'market-lease-ready-desktop');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'market-lease-ready-phone');

    // What the API says the page drew from.
    const lease = await env.api.call('GET', `/v1/leases/${bid.lease_id}`, undefined, customer);
    assert.equal(lease.provisioning.step, 'ready');
    assert.deepEqual(lease.provisioning.steps.map((s) => s.step), ['waiting_for_host', 'pulling', 'starting', 'ready']);
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});
