// Issue 29, from an answer to a running machine, in a real browser against a real server (fresh
// database, manual clock), at 1440×900 and 390×844:
//  - the account page: its sections are tabs (no section inside another: the Notifications section
//    used to swallow Billing, Invoices, SSH keys, Top-ups and Transfers), the overview is short, a
//    link to a tab opens it, the balance is in the header, errors are sentences about the field;
//  - the rent page warns that the account has no SSH key and links to where one is added; a rental
//    made there opens its console: state, SSH line, GPUs, paid until with a countdown, its tax
//    invoice (a page with the site's navigation), and Release behind a confirmation;
//  - the market opens with the card and the count of a link, warns about the SSH key, and a buy
//    opens the lease's console (price, per hour, paid until, hours, stop);
//  - the calculator's configurations carry Rent / Buy spot, and the verdict links to the rent page;
//    the catalog's cards with none free lead somewhere;
//  - on a phone the header's links are all visible; axe-core finds no serious or critical violation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, waitForData, unexpected, signUp, setBillingCountry, useServerAndBrowser, accountTab, logIn, scriptedAgent, headerLinksVisible, tokenOf as tokenOfUser } from './lib/helpers.mjs';
import { noSeriousViolations } from './lib/axe.mjs';

const env = useServerAndBrowser();
const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };
const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj grace@laptop';

const tokenOf = (name) => tokenOfUser(env.api, name);



test('account: tabs instead of one long page, the balance in the header, errors as sentences', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.setViewportSize(DESKTOP);
    const name = username('ann');
    await signUp(page, name);
    // No section inside another (the unclosed Notifications section held five others).
    assert.equal(await page.locator('section section').count(), 0);
    assert.equal(await page.locator('#notifications-section #billing, #notifications-section #ssh-keys').count(), 0);
    const tabs = await page.locator('.account-tabs a').allInnerTexts();
    assert.deepEqual(tabs, ['Overview', 'Storage', 'Billing and invoices', 'SSH keys', 'Top-ups and history', 'Notifications and alerts', 'Quote requests', 'Security and API keys']);
    assert.equal(await page.getAttribute('.account-tabs a[aria-current="page"]', 'href'), '#overview');
    assert.equal(await page.locator('#wallets').isVisible(), true);
    assert.equal(await page.locator('#ssh-key-form').isVisible(), false);
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    assert.ok(height < 1800, `the overview is ${height} px high (the whole page was 3,244 px)`);
    // The balance in the header, $0.00 before the first top-up, then what the wallet holds.
    await page.waitForSelector('[data-testid="header-balance"]:not([hidden])');
    assert.equal(await page.locator('[data-testid="header-balance"]').innerText(), '$0.00');
    await env.api.fund(await tokenOf(name), '1234.50');
    await page.click('#refresh-wallets');
    await page.waitForFunction(() => document.querySelector('[data-testid="header-balance"]')?.textContent === '$1,234.50');
    assert.equal(await page.locator('[data-testid="balance-USD"]').innerText(), '$1,234.50');
    await screenshot(page, 'console-account-overview-desktop');

    // A refused amount is a sentence about the field, under it.
    await page.fill('#topup-amount', '12.345');
    await page.click('#topup-form button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#err-topup-amount')?.textContent.length > 0);
    assert.equal(await page.locator('#err-topup-amount').innerText(), 'Amount must be a number such as 100.00, with at most 2 decimals.');

    // A tab by its link; the URL says which, and a fresh page at that URL opens it.
    await accountTab(page, 'ssh-keys');
    assert.match(page.url(), /#ssh-keys$/);
    assert.equal(await page.locator('#ssh-key-form').isVisible(), true);
    assert.equal(await page.locator('#wallets').isVisible(), false);
    await page.goto('/account/#history');
    await page.waitForSelector('#signed-in:not([hidden])');
    await waitForData(page);
    assert.equal(await page.getAttribute('.account-tabs a[aria-current="page"]', 'href'), '#history');
    await page.waitForSelector('#transfers table');
    assert.match(await page.locator('#transfers table').innerText(), /\+\$1,234\.50/);
    await accountTab(page, 'notifications-section');
    assert.equal(await page.locator('#notifications').isVisible(), true);
    await accountTab(page, 'billing');
    await page.waitForSelector('#billing-form');
    await noSeriousViolations(page, 'account, billing tab');
    await accountTab(page, 'overview');
    await noSeriousViolations(page, 'account, overview');

    // The phone: every header link visible, the tabs wrap.
    await page.setViewportSize(PHONE);
    await headerLinksVisible(page);
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
    await screenshot(page, 'console-account-overview-phone');
    assert.deepEqual(unexpected(problems, ['/v1/topups', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

test('rent with no SSH key: warned; the console of the rental: SSH, paid until, invoice, release', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.setViewportSize(DESKTOP);
    const name = username('rob');
    await signUp(page, name);
    await setBillingCountry(page, 'US');
    const token = await tokenOf(name);
    await env.api.fund(token, '1000.00');

    await page.goto('/rent/?gpu=A100%20SXM&count=2&term=week&region=DFW-1');
    await page.waitForSelector('[data-testid="quote-total"]');
    await page.waitForSelector('[data-testid="ssh-warning"]:not([hidden])');
    assert.match(await page.locator('[data-testid="ssh-warning"]').innerText(), /Your account has no SSH key/);
    assert.equal(await page.getAttribute('[data-testid="add-ssh-key"]', 'href'), '/account/#ssh-keys');
    assert.equal(await page.locator('#rent-count').inputValue(), '2', 'the count from the link');
    assert.equal(await page.locator('#rent-region').inputValue(), 'DFW-1', 'the region from the link');
    await screenshot(page, 'console-rent-ssh-warning-desktop');
    // The link opens the account's SSH keys tab; a key added there, the warning is gone.
    await page.click('[data-testid="add-ssh-key"]');
    await page.waitForSelector('#ssh-key-form');
    await page.fill('#ssh-key-public', KEY);
    await page.click('#ssh-key-submit');
    await page.locator('#ssh-key-list table').waitFor();
    await page.goBack();
    await page.waitForSelector('[data-testid="quote-total"]');
    await page.waitForFunction(() => document.querySelector('[data-testid="ssh-warning"]')?.hidden === true);

    await page.uncheck('#rent-auto');
    await page.waitForFunction(() => document.querySelector('[data-testid="quote-total"]')?.textContent === '$532.00');
    await page.click('#rent-submit');
    const done = page.locator('[data-testid="rent-done"]');
    await done.waitFor();
    const id = await done.getAttribute('data-rental');
    await done.locator('[data-testid="rent-console"]').click();
    await page.waitForURL(new RegExp(`/instances/\\?rental=${id}$`));
    await page.waitForSelector('.instance[data-kind="rental"]');
    const r = await env.api.call('GET', `/v1/rentals/${id}`, undefined, token);
    assert.equal(await page.locator('#instance-title').innerText(), `Rental #${id}: 2 × A100 SXM`);
    assert.match(await page.locator('[data-testid="machine"]').innerText(), new RegExp(`2 × A100 SXM in DFW-1 \\(node ${r.node_id}, cards ${r.cards.join(', ')}\\)`));
    assert.equal(await page.locator('[data-testid="term-net"]').innerText(), '$532.00');
    const paid = await page.locator('[data-testid="paid"]').innerText();
    assert.match(paid, /5% multi-card discount/);
    assert.match(await page.locator('[data-testid="next"]').innerText(), /the renewal invoice is issued in (6 d 0 h|5 d 23 h)/);
    assert.equal(await page.locator('.instance').getAttribute('data-status'), r.state);
    // The SSH line once the fleet's node runs it (the demo fleet has no agent: its state is said).
    const ssh = await page.locator('[data-testid="ssh"]').innerText();
    if (r.instance.connection.ssh) assert.match(ssh, new RegExp(r.instance.connection.ssh.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    else assert.match(ssh, r.state === "active" ? new RegExp(`Running on node ${r.node_id}. No SSH line is reported for it yet`) : /Starting on its node/);
    // Its tax invoice: a page with the site's navigation and no configuration text.
    const invoice = page.locator('[data-testid="invoice-link"]').first();
    assert.match(await invoice.innerText(), /^Invoice \d{4}-\d{6}$/);
    await noSeriousViolations(page, 'rental console');
    await screenshot(page, 'console-rental-desktop');
    await page.setViewportSize(PHONE);
    await headerLinksVisible(page);
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
    await screenshot(page, 'console-rental-phone');
    await page.setViewportSize(DESKTOP);
    const number = (await invoice.innerText()).replace('Invoice ', '');
    await invoice.click();
    await page.waitForSelector('#title');
    assert.equal(await page.locator('#title').innerText(), `Invoice ${number}`);
    assert.equal(await page.locator('nav.site a[href="/account/#billing"]').count(), 1, 'the invoice page has the site navigation');
    assert.doesNotMatch(await page.locator('body').innerText(), /not configured/);
    assert.match(await page.locator('#totals').innerText(), /532\.00 USD/);
    await screenshot(page, 'console-invoice-desktop');
    await page.goBack();
    await page.waitForSelector('.instance[data-kind="rental"]');

    // Release: a confirmation that says what is lost, then the rental is released.
    await page.click('[data-testid="release"]');
    assert.match(await page.locator('[role="alertdialog"]').innerText(), /Nothing of the term is refunded/);
    await page.click('[data-testid="confirm-release"]');
    await page.waitForSelector('.instance[data-status="released"]');
    assert.match(await page.locator('[data-testid="ssh"]').innerText(), /Released: the machine is gone/);
    assert.equal(await page.locator('[data-testid="release"]').count(), 0);

    // The list of instances links to it.
    await page.goto('/instances/');
    await page.waitForSelector('#instance table');
    assert.match(await page.locator(`#instance a[href="/instances/?rental=${id}"]`).first().innerText(), new RegExp(`Rental #${id}`));
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('a rental whose node agent runs it: the console shows the steps, then the SSH line with Copy', async () => {
  const name = username('sam');
  const customer = await env.api.user(name, ['customer']);
  await env.api.fund(customer, '700.00');
  await env.api.call('POST', '/v1/ssh-keys', { public_key: KEY }, customer);
  const rental = await env.api.call('POST', '/v1/rentals', { gpu: 'H100 SXM', count: 1, term: 'week' }, customer);
  const admin = await env.server.adminToken();
  const token = await env.api.call('POST', `/v1/admin/nodes/${rental.node_id}/enrolment-tokens`, {}, admin);
  const node = scriptedAgent(env.api, (await env.api.call('POST', '/v1/agent/enroll', { token: token.token, hostname: 'node-console' })).credential, { publicHost: '198.51.100.9' });
  const desired = await node.beat(8);
  const w = desired.workloads.find((x) => x.id === `rental-${rental.id}`);
  await node.beat(8, [{ id: w.id, state: 'pulling', detail: 'pulling ' + w.image }]);

  const { context, page, problems } = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    await logIn(page, name);
    // From the account page's rental card to its console.
    await page.click(`#rental-${rental.id} [data-testid="rental-console"]`);
    await page.waitForSelector('.instance[data-kind="rental"] .steps');
    assert.equal(await page.locator('.step[aria-current="step"]').getAttribute('data-step'), 'pulling');
    assert.match(await page.locator('[data-testid="ssh"]').innerText(), /SSH line appears here|No SSH line is reported/);
    await screenshot(page, 'console-rental-pulling-phone');
    // The container answers: within the console's fast refresh (2 s) the SSH line is there.
    await node.beat(8, [{ id: w.id, state: 'running', ssh_port: 40003 }]);
    await page.waitForSelector('[data-testid="ssh"] code.connection-line', { timeout: 10000 });
    assert.equal(await page.locator('[data-testid="ssh"] code').innerText(), 'ssh -p 40003 root@198.51.100.9');
    await page.click('[data-testid="ssh"] button:has-text("Copy")');
    await page.waitForSelector('[data-testid="ssh"] button:has-text("Copied")');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'ssh -p 40003 root@198.51.100.9');
    assert.ok((await page.locator('[data-testid="machine"]').innerText()).includes(w.image));
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
    await noSeriousViolations(page, 'rental console with its SSH line (phone)');
    await screenshot(page, 'console-rental-ssh-phone');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('phone: the market opens with the link\'s card and count, warns, buys; the lease console stops it', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    const name = username('pia');
    await signUp(page, name);
    await setBillingCountry(page, 'US');
    await env.api.fund(await tokenOf(name), '100.00');
    await page.goto('/market/?gpu=H100%20SXM&count=2');
    await page.waitForSelector('#bid-form:not([hidden])');
    await waitForData(page);
    assert.equal(await page.getAttribute('[role="tab"][aria-selected="true"]', 'data-gpu'), 'H100 SXM');
    assert.equal(await page.locator('#bid-gpus').inputValue(), '2', 'the count from the link');
    await page.waitForSelector('[data-testid="ssh-warning"]:not([hidden])');
    assert.match(await page.locator('[data-testid="ssh-warning"]').innerText(), /no SSH key/);
    // The warning offers to add a key in place: a refused one says why under the box, a good one
    // makes the warning go; the bid's own fields are untouched (no nested form, no extra field).
    await page.click('[data-testid="add-ssh-key-here"]');
    await page.fill('#ssh-inline-key', 'ssh-dss AAAAB3NzaC1kc3MAAACBAP1 old@box');
    await page.click('[data-testid="ssh-inline-form"] button');
    await page.waitForFunction(() => document.querySelector('#err-ssh-inline-key')?.textContent.length > 0);
    assert.match(await page.locator('#err-ssh-inline-key').innerText(), /^The public key /);
    assert.equal(await page.locator('#bid-result').innerText(), '', 'no bid was placed');
    await page.fill('#ssh-inline-key', KEY);
    await page.click('[data-testid="ssh-inline-form"] button');
    await page.waitForFunction(() => document.querySelector('[data-testid="ssh-warning"]')?.hidden === true);
    assert.equal((await env.api.call('GET', '/v1/ssh-keys', undefined, await tokenOf(name))).ssh_keys.length, 1);
    await headerLinksVisible(page);
    assert.equal(await page.locator('.site-header .nav a[href="/instances/"]').isVisible(), true, 'Instances in the header once signed in');
    await page.check('input[name="order"][value="market"]');
    await page.click('#bid-submit');
    const result = page.locator('#bid-result .alert-ok');
    await result.waitFor();
    assert.match(await result.innerText(), /2 × H100 SXM at \$2\.880\/GPU-h — \$5\.76 per hour/);
    await screenshot(page, 'console-market-bought-phone');
    await result.locator('[data-testid="bid-console"]').click();
    await page.waitForSelector('.instance[data-kind="lease"]');
    const id = await page.locator('.instance').getAttribute('data-id');
    assert.equal(await page.locator('#instance-title').innerText(), `Lease #${id}: 2 × H100 SXM`);
    const paid = await page.locator('[data-testid="paid"]').innerText();
    assert.match(paid, /\$2\.880 per GPU-hour, \$5\.76\/h for the lease/);
    assert.equal(await page.locator('[data-testid="hourly"]').innerText(), '$5.76/h');
    assert.equal(await page.locator('[data-testid="hours-paid"]').innerText(), '1');
    assert.equal(await page.locator('[data-testid="charged"]').innerText(), '$5.76');
    assert.match(paid, /the next hour is billed in (59 min|1 h 0 min|60 min)/);
    assert.match(await page.locator('[data-testid="ssh"]').innerText(), /simulated host \(demo\)|SSH line appears/);
    assert.equal(await page.getAttribute('[data-testid="invoice-link"]', 'href'), '/account/#billing');
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
    await noSeriousViolations(page, 'lease console (phone)');
    await screenshot(page, 'console-lease-phone');
    // The header's balance: the first hour was paid.
    assert.equal(await page.locator('[data-testid="header-balance"]').innerText(), '$94.24');

    await page.click('[data-testid="stop"]');
    await page.click('[data-testid="confirm-stop"]');
    await page.waitForSelector('.instance[data-status="ended"], .instance[data-status="stopped"]');
    assert.match(await page.locator('[data-testid="state"]').innerText(), /stopped by you/);
    await page.setViewportSize(DESKTOP);
    await screenshot(page, 'console-lease-stopped-desktop');

    // The market's lease row links to the console.
    await page.goto('/market/');
    await page.waitForSelector('#leases table');
    assert.equal(await page.getAttribute('[data-testid="lease-console"]', 'href'), `/instances/?lease=${id}`);
    assert.deepEqual(unexpected(problems, ['/v1/ssh-keys', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

test('answers carry their action: the calculator\'s configurations, its verdict, the catalog', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.setViewportSize(DESKTOP);
    await page.goto('/calculator/?model=70b&workload=infer&precision=fp8&kv_precision=fp16&context=8192');
    await page.waitForSelector('#verdict');
    await waitForData(page);
    const verdict = page.locator('[data-testid="verdict-rent"]');
    assert.equal(await verdict.innerText(), 'one H100 PCIe');
    assert.equal(await verdict.getAttribute('href'), '/rent/?gpu=H100+PCIe&count=1&term=month');
    const firstRow = page.locator('#results table tbody tr').first();
    assert.equal(await firstRow.locator('a.action-rent').getAttribute('href'), '/rent/?gpu=H100+PCIe&count=1&term=month');
    const rows = await page.locator('#results table tbody tr').count();
    assert.equal(await page.locator('#results table tbody a.action-rent').count(), rows, 'every row can be rented');
    assert.ok((await page.locator('#results table tbody a.action-spot').count()) > 0, 'cards that trade on the exchange can be bought spot');
    const spot = page.locator('#results table tbody a.action-spot').first();
    assert.match(await spot.getAttribute('href'), /^\/market\/\?gpu=[^&]+&count=\d$/);
    // The plan's cheapest to finish is another card: one sentence says why, with both figures.
    await page.waitForSelector('#plan-verdict');
    const finish = await page.locator('[data-testid="plan-verdict-action"]').innerText();
    assert.notEqual(finish, 'one H100 PCIe');
    assert.match(await page.locator('[data-testid="plan-why"]').innerText(),
      new RegExp(`^One H100 PCIe is the cheapest to hold \\(\\$1,490\\.00 a month\\), but ${finish} is the cheapest to finish this job`));
    assert.ok((await page.locator('#plan-results tbody a.action-rent').count()) >= 1, 'the plan rows carry their action');
    // The verdict's configuration is a link to its cheaper way (it was link-coloured text).
    assert.match(await page.locator('[data-testid="plan-verdict-action"]').getAttribute('href'), /^\/(market|rent)\/\?gpu=/);
    // The calculator's recommendation is in the plan's table too (its last row when it is not
    // among the cheapest to finish), with its action; spot-only rows offer Buy spot, never Rent.
    const heldRow = page.locator('#plan-results tbody tr', { hasText: 'H100 PCIe' });
    assert.ok((await heldRow.count()) >= 1, 'one H100 PCIe is in the plan table');
    for (const row of await page.locator('#plan-results tbody tr').all()) {
      const term = await row.locator('td[data-label="Term"]').innerText();
      if (term.trim() === '—') assert.equal(await row.locator('a.action-rent').count(), 0, 'no Rent on a spot-only row');
    }
    await noSeriousViolations(page, 'calculator');
    await screenshot(page, 'console-calculator-actions-desktop');
    await firstRow.locator('a.action-rent').click();
    await page.waitForSelector('[data-testid="quote-total"]');
    assert.equal(await page.locator('#rent-title').innerText(), 'Rent H100 PCIe');

    // The catalog signed out: "Sell" in the header; every card has an action, none a dead end.
    await page.goto('/');
    await page.waitForSelector('.gpu-card');
    await waitForData(page);
    assert.equal(await page.locator('.site-header .nav a[href="/sell/"]').isVisible(), true);
    assert.equal(await page.locator('.site-header .nav a[href="/instances/"]').isVisible(), false, 'Instances only signed in');
    const cards = await page.locator('.gpu-card').count();
    assert.equal(await page.locator('.gpu-card .rent-action a.btn').count() >= cards, true);
    for (const c of await page.locator('.gpu-card:has([data-testid="on-request"])').all()) {
      const first = c.locator('[data-testid="on-request"] a').first();
      assert.match(await first.getAttribute('href'), /^\/(market\/\?gpu=|\?stock=1)/, 'a card with none free leads to spot hours or to free cards');
    }
    await page.setViewportSize(PHONE);
    await headerLinksVisible(page);
    await screenshot(page, 'console-catalog-phone');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});
