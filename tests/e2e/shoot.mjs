// Dev helper: screenshots of one URL at phone and desktop sizes, printing console errors.
//   node tests/e2e/shoot.mjs URL OUT_PREFIX   (while working on a page: OUT_PREFIX-desktop.png, OUT_PREFIX-phone.png, ...)
import { chromium } from 'playwright-core';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [url, prefix] = process.argv.slice(2);
const ctx = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'gpuhub-chrome-')), {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run', '--disable-quic'],
});
for (const [name, vp] of [['desktop', { width: 1280, height: 900 }], ['phone', { width: 390, height: 844 }]]) {
  const page = await ctx.newPage();
  await page.setViewportSize(vp);
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.log(name, m.type(), m.text()); });
  page.on('pageerror', (e) => console.log(name, 'pageerror', e.message));
  await page.goto(url, { waitUntil: 'networkidle' });
  await page.waitForTimeout(300);
  await page.screenshot({ path: `${prefix}-${name}.png`, fullPage: name === 'desktop' });
  const h = await page.evaluate(() => document.documentElement.scrollHeight);
  for (let y = vp.height, i = 2; y < h && i <= 4; y += vp.height, i++) {
    await page.evaluate((y) => window.scrollTo(0, y), y);
    await page.waitForTimeout(100);
    await page.screenshot({ path: `${prefix}-${name}-${i}.png` });
  }
  await page.close();
}
await ctx.close();
