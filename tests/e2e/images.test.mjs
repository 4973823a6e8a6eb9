// Images and ports as the market page offers them, in a real browser against a real server (the
// host agent scripted over its HTTP API, as in agent.test.mjs): the curated list with its notes
// (an image without sshd takes longer), extra ports, a private registry credential that the page
// forgets after the order and no page shows again, a refused port said beside its field, and the
// lease's image and published ports once the agent reports them. Screenshots on desktop and phone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, waitForData, unexpected, useServerAndBrowser, logIn, scriptedAgent } from './lib/helpers.mjs';

const env = useServerAndBrowser();
const SECRET = 'e2e-registry-token-7f3a';

test('the buy form picks a curated image, extra ports and a registry credential; the lease shows them', async () => {
  const provider = await env.api.user(username('ivy'), ['provider']);
  const until = new Date(Date.now() + 30 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  const m = await env.api.call('POST', '/v1/machines', { gpu: 'H100 SXM', gpus: 2, region: 'IAD-1', vcpus: 32, ram_gb: 256, disk_gb: 2000, port_range_first: 42000, port_range_last: 42099 }, provider);
  assert.equal(m.port_range_first, 42000);
  await env.api.call('POST', '/v1/asks', { machine_id: m.id, price_usd_per_gpu_hour: '0.900', min_gpus: 1, available_until: until }, provider);
  const token = await env.api.call('POST', `/v1/machines/${m.id}/enrolment-tokens`, {}, provider);
  const credential = (await env.api.call('POST', '/v1/agent/enroll', { token: token.token, hostname: 'gpu-img' })).credential;
  const host = scriptedAgent(env.api, credential, { hostname: 'gpu-img', publicHost: '198.51.100.9', uuidPrefix: 'GPU-img' });
  const beat = (workloads = []) => host.beat(2, workloads);
  await beat();

  const customerName = username('ned');
  const customer = await env.api.user(customerName, ['customer']);
  await env.api.fund(customer, '50.00');
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await logIn(page, customerName);
    await page.goto('/market/');
    await page.waitForSelector('#bid-form:not([hidden])');
    await page.click('[role="tab"][data-gpu="H100 SXM"]');
    await waitForData(page);
    // The curated list, each with what it is; none of the built-in images has sshd.
    await page.waitForSelector('#bid-image-choice option[value="pytorch"]', { state: 'attached' });
    const options = await page.locator('#bid-image-choice option').allInnerTexts();
    assert.ok(options.some((o) => o.startsWith('vllm — vllm/vllm-openai:')), options.join('|'));
    await page.selectOption('#bid-image-choice', 'pytorch');
    assert.match(await page.locator('#bid-image-note').innerText(), /PyTorch 2\.4 .* no SSH server: the first start installs one, so it takes a minute or two longer/);
    assert.equal(await page.locator('#bid-image').isHidden(), true);

    // A port sshd owns is refused beside the field; nothing is bought.
    await page.check('input[name="order"][value="market"]');
    await page.fill('#bid-gpus', '1');
    await page.fill('#bid-ports', '22');
    await page.click('#bid-submit');
    await page.waitForFunction(() => document.querySelector('#err-bid-ports')?.textContent.length > 0);
    assert.match(await page.locator('#err-bid-ports').innerText(), /22 is sshd's/);

    await page.fill('#bid-ports', '8888, 8000');
    await page.click('#bid-registry summary');
    await page.fill('#bid-registry-username', 'ned-bot');
    await page.fill('#bid-registry-password', SECRET);
    await page.click('#bid-submit');
    await page.locator('#bid-result .alert-ok').waitFor();
    const lease = /Filled: lease #(\d+)/.exec(await page.locator('#bid-result').innerText())?.[1];
    assert.ok(lease);
    assert.equal(await page.locator('#bid-registry-password').inputValue(), '', 'the secret leaves the page');
    await page.locator('#leases table').waitFor();
    let row = await page.locator('#leases tbody tr').first().innerText();
    assert.match(row, /pytorch \(pytorch\/pytorch:2\.4\.1-cuda12\.4-cudnn9-runtime\)/);
    assert.match(row, /Ports 8888, 8000: published when it runs/);
    assert.match(row, /Private registry credential: given/);
    assert.match(row, /takes a minute or two longer/);

    // The host is told: the image, the ports with the listing's range, the credential (only here).
    const desired = await beat();
    const w = desired.workloads.find((x) => x.id === `lease-${lease}`);
    assert.ok(w, JSON.stringify(desired));
    assert.equal(w.image, 'pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime');
    assert.deepEqual(w.ports, [8888, 8000]);
    assert.deepEqual(w.port_range, [42000, 42099]);
    assert.deepEqual(w.registry_auth, { username: 'ned-bot', password: SECRET, serveraddress: 'docker.io' });
    await beat([{ id: w.id, state: 'running', ssh_port: 40003, ports: [{ container: 8888, host: 42000 }, { container: 8000, host: 42001 }] }]);
    await page.reload();
    await page.locator('#leases table').waitFor();
    row = await page.locator('#leases tbody tr').first().innerText();
    assert.ok(row.includes('ssh -p 40003 root@198.51.100.9'), row);
    assert.ok(row.includes('198.51.100.9:42000 → container port 8888'), row);
    assert.ok(row.includes('198.51.100.9:42001 → container port 8000'), row);
    assert.doesNotMatch(row, /longer/, 'running: no more waiting note');
    assert.ok(!(await page.content()).includes(SECRET), 'no page shows the credential');
    const leases = await env.api.call('GET', '/v1/leases', undefined, customer);
    assert.ok(!JSON.stringify(leases).includes(SECRET));
    await page.locator('#leases-card').scrollIntoViewIfNeeded();
    await screenshot(page, 'market-lease-image-ports-desktop');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'market-lease-image-ports-phone');
    assert.deepEqual(unexpected(problems, ['/v1/bids', 'status of 400']), []);
  } finally {
    await context.close();
  }
});
