// A real `gpuhub serve` for a browser test: port 0, a fresh SQLite database in a temporary folder,
// fast password hashing, a known webhook secret, the demo catalog (opening asks on the exchange)
// and the manual clock, a known seller for invoices, with an administrator (ADMIN_USERNAME) for
// the clock. Stopped (SIGTERM, then SIGKILL) by stop().
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createHmac, randomBytes } from 'node:crypto';

export const REPO = resolve(new URL('../../..', import.meta.url).pathname);
export const ADMIN_USERNAME = 'root';
const ADMIN_PASSWORD = 'e2e admin password';

export async function startServer() {
  const buildDir = process.env.GPUHUB_BUILD_DIR;
  if (!buildDir) throw new Error('GPUHUB_BUILD_DIR is not set (run tests/e2e/run.sh BUILD_DIR)');
  const bin = join(resolve(buildDir), 'gpuhub');
  const dir = mkdtempSync(join(tmpdir(), 'gpuhub-e2e-'));
  const secret = 'whsec_' + randomBytes(16).toString('hex');
  const config = join(dir, 'gpuhub.toml');
  writeFileSync(
    config,
    '[auth]\nargon2_ops_limit = 1\nargon2_mem_limit_bytes = 8192\n' +
      '[billing]\nseller_name = "gpuhub Inc."\nseller_address = "1 Main St\\nDover, DE 19901"\n'
  );
  const db = `sqlite:${join(dir, 'gpuhub.db')}`;
  // The administrator exists before the server opens the database (it holds the database while it
  // runs).
  const passwordFile = join(dir, 'admin-password');
  writeFileSync(passwordFile, ADMIN_PASSWORD + '\n');
  const created = spawnSync(bin, ['admin', 'create-user', '--username', ADMIN_USERNAME, '--role', 'admin', '--db', db, '--config', config, '--password-file', passwordFile], { encoding: 'utf8' });
  if (created.status !== 0) throw new Error('gpuhub admin create-user failed: ' + created.stdout + created.stderr);
  const child = spawn(
    bin,
    ['serve', '--listen', '127.0.0.1:0', '--db', db, '--config', config, '--demo', '--clock', 'manual'],
    {
      env: { ...process.env, GPUHUB_WEBHOOK_SECRET: secret, GPUHUB_WEB_DIR: join(REPO, 'web'), GPUHUB_DATA_DIR: join(REPO, 'data') },
      stdio: ['ignore', 'pipe', 'pipe'],
    }
  );
  let log = '';
  child.stderr.on('data', (d) => (log += d));
  const url = await new Promise((resolveUrl, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('gpuhub serve did not start in 60 s:\n' + log)), 60000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gpuhub serve exited with ${code}:\n${log}`));
    });
  });
  return {
    url,
    secret,
    log: () => log,
    // Delivers a BTCPay-style InvoiceSettled webhook for `invoiceId`, signed with the secret.
    async settleInvoice(invoiceId) {
      const body = JSON.stringify({
        deliveryId: 'dlv_' + randomBytes(6).toString('hex'),
        webhookId: 'wh_e2e',
        isRedelivery: false,
        type: 'InvoiceSettled',
        timestamp: Math.floor(Date.now() / 1000),
        storeId: 'store_e2e',
        invoiceId,
      });
      const sig = 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
      const res = await fetch(url + '/v1/payments/webhook', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'BTCPay-Sig': sig },
        body,
      });
      return { status: res.status, body: await res.json() };
    },
    // Moves the server's manual clock by `seconds` (the time-driven work runs at once); the new
    // time, as the server writes it.
    // A session token of the administrator.
    async adminToken() {
      const login = await fetch(url + '/v1/sessions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ username: ADMIN_USERNAME, password: ADMIN_PASSWORD }),
      });
      return (await login.json()).token;
    },
    async advanceClock(seconds) {
      const token = await this.adminToken();
      const res = await fetch(url + '/v1/admin/clock/advance', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + token },
        body: JSON.stringify({ seconds }),
      });
      const body = await res.json();
      if (res.status !== 200) throw new Error('clock advance: ' + JSON.stringify(body));
      return body.now;
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => {
          const t = setTimeout(() => {
            child.kill('SIGKILL');
            r();
          }, 10000);
          child.on('exit', () => {
            clearTimeout(t);
            r();
          });
        });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
