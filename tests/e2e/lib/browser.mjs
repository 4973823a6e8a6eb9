// Debian's Chromium driven by playwright-core (no downloaded browser), headless, with the flags a
// root user on a machine without outside network needs. Every launch gets a fresh, empty profile:
// playwright-core's launch() passes its own new temporary --user-data-dir (and deletes it on
// close), and each test page gets its own browser context (no shared cookies).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from './server.mjs';

export const OUT_DIR = process.env.GPUHUB_E2E_OUT || join(REPO, 'tests', 'out', 'e2e');
export const VIEWPORTS = {
  phone: { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true },
  desktop: { viewport: { width: 1440, height: 900 } },  // the desktop (issue 29)
};

export async function launch() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
  mkdirSync(OUT_DIR, { recursive: true });
  return {
    browser,
    async close() {
      await browser.close();
    },
  };
}

// A page whose console errors, uncaught exceptions and failed requests are recorded in `problems`.
// `allow` lists substrings of messages a test expects (an API error it provokes on purpose).
export async function newPage(browser, size, baseURL) {
  const context = await browser.newContext({ ...VIEWPORTS[size], baseURL });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()} (${m.location().url || 'page'})`);
  });
  page.on('pageerror', (e) => problems.push(`uncaught: ${e.message}`));
  // A request the page itself cancelled (a reload or navigation while a poll was in flight: Chromium
  // reports net::ERR_ABORTED) is not a failure of the server; a reset, refused or empty answer is.
  page.on('requestfailed', (r) => {
    const reason = r.failure() && r.failure().errorText;
    if (reason === 'net::ERR_ABORTED') return;
    problems.push(`request failed: ${r.method()} ${r.url()} ${reason}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
  });
  return { context, page, problems };
}

export async function screenshot(page, name) {
  await page.screenshot({ path: join(OUT_DIR, name + '.png'), fullPage: true });
}
