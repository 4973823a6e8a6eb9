// Shared page chrome: the site header (brand, navigation, session) for every page, from this one
// place; marks the current page in the navigation and shows who is signed in with the balance of
// their wallets (refreshed when a page says the wallets changed: the gpuhub:wallets event). Module scripts run
// in document order and each page loads this one first, so the header exists before page code.
import { api, currentSession } from './api.js';
import { money } from './format.js';
import { h, replace } from './dom.js';

// Static markup, no data in it.
const HEADER = `
<div class="bar">
  <a class="brand" href="/" aria-label="gpuhub home"><svg viewBox="0 0 32 32" aria-hidden="true"><rect width="32" height="32" rx="7" fill="#4338ca"/><rect x="8" y="8" width="16" height="16" rx="3" fill="none" stroke="#fff" stroke-width="2.2"/><rect x="12.5" y="12.5" width="7" height="7" rx="1.2" fill="#fbbf24"/><g stroke="#c7d2fe" stroke-width="2" stroke-linecap="round"><path d="M12 4.5v3M16 4.5v3M20 4.5v3M12 24.5v3M16 24.5v3M20 24.5v3M4.5 12h3M4.5 16h3M4.5 20h3M24.5 12h3M24.5 16h3M24.5 20h3"/></g></svg>gpuhub</a>
  <nav class="nav" aria-label="Main">
    <a href="/">Catalog</a>
    <a href="/calculator/">Calculator</a>
    <a href="/guide/">Guide</a>
    <a href="/use/training/" data-section="/use/">Use cases</a>
    <a href="/market/">Market</a>
    <a href="/instances/" data-signed-in hidden>Instances</a>
    <a href="/sell/">Sell</a>
    <a href="/account/">Account</a>
  </nav>
  <div class="session-slot" id="session-slot" aria-live="polite"></div>
</div>
`;

function renderHeader() {
  for (const header of document.querySelectorAll('header.site-header')) header.innerHTML = HEADER;
}

function markCurrentPage() {
  const path = location.pathname.replace(/index\.html$/, '');
  for (const a of document.querySelectorAll('.nav a')) {
    const href = a.getAttribute('href');
    const section = a.dataset.section || href;
    const current = href === '/' ? path === '/' : path.startsWith(section);
    if (current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

// The wallets' available balances ("$94.24", and "€10.00" beside it for another non-empty wallet);
// the USD wallet is always shown, as $0.00 before the first top-up.
async function renderBalance(slot) {
  const el = slot.querySelector('.header-balance');
  if (!el) return;
  try {
    const data = await api('GET', '/v1/wallets');
    const shown = data.wallets.filter((w) => w.currency === 'USD' || Number(w.available) !== 0);
    if (!shown.some((w) => w.currency === 'USD')) shown.unshift({ currency: 'USD', available: '0' });
    el.textContent = shown.map((w) => money(w.available, w.currency)).join(' · ');
    el.title = 'Available in your wallets';
    el.hidden = false;
  } catch {
    el.hidden = true;  // the name alone; the account page says why the wallets are missing
  }
}

function renderSession(session) {
  const signedIn = !!(session && session.user);
  // Links for signed-in people only (their machines): shown once we know who is there.
  for (const a of document.querySelectorAll('.nav [data-signed-in]')) a.hidden = !signedIn;
  const slot = document.getElementById('session-slot');
  if (!slot) return;
  if (signedIn) {
    replace(
      slot,
      h('a', { href: '/account/#overview', class: 'header-balance', 'data-testid': 'header-balance', hidden: true }),
      h(
        'a',
        { href: '/account/', class: 'who', title: 'Your account', dataset: { initial: session.user.username.charAt(0).toUpperCase() } },
        session.user.username
      )
    );
    renderBalance(slot);
  } else {
    replace(slot, h('a', { href: '/account/', class: 'btn btn-small btn-ghost-light' }, 'Log in'));
  }
}

// A table wider than its card scrolls sideways inside it (app.css); on a narrow screen that is not
// visible, so a line above such a table says so, and the scrolling box takes the keyboard's focus
// (a region named after the table) so that it can be scrolled without a pointer. Re-checked when
// the page's content or size changes (tables are drawn by the page modules after this one runs).
const HINT = 'scroll-hint';
function markWideTables() {
  for (const wrap of document.querySelectorAll('.table-wrap')) {
    const wide = wrap.scrollWidth > wrap.clientWidth + 2 && getComputedStyle(wrap).overflowX !== 'visible';
    const prev = wrap.previousElementSibling;
    const has = prev && prev.classList.contains(HINT);
    if (wide && !has) wrap.before(h('p', { class: HINT, 'aria-hidden': 'true' }, 'Scroll sideways for more columns →'));
    else if (!wide && has) prev.remove();
    if (wide && !wrap.hasAttribute('tabindex')) {
      const caption = wrap.querySelector('caption');
      const heading = wrap.closest('section, .card')?.querySelector('h2, h3');
      wrap.setAttribute('tabindex', '0');
      wrap.setAttribute('role', 'region');
      wrap.setAttribute('aria-label', ((caption || heading)?.textContent.trim() || 'Table') + ' (scrolls sideways)');
    } else if (!wide && wrap.getAttribute('tabindex') === '0') {
      for (const a of ['tabindex', 'role', 'aria-label']) wrap.removeAttribute(a);
    }
  }
}
let wideTimer = 0;
function markWideTablesSoon() {
  clearTimeout(wideTimer);
  wideTimer = setTimeout(markWideTables, 100);
}

export function initLayout() {
  new MutationObserver((records) => {
    // Its own hints do not count as a change.
    if (records.every((r) => [...r.addedNodes, ...r.removedNodes].every((n) => n.classList && n.classList.contains(HINT)))) return;
    markWideTablesSoon();
  }).observe(document.body, { childList: true, subtree: true });
  window.addEventListener('resize', markWideTablesSoon);
  renderHeader();
  markCurrentPage();
  currentSession().then(renderSession);
  document.addEventListener('gpuhub:session', (e) => renderSession(e.detail));
  document.addEventListener('gpuhub:wallets', () => {
    const slot = document.getElementById('session-slot');
    if (slot) renderBalance(slot);
  });
}

initLayout();
