// Shared page chrome: the site header (brand, navigation, session) for every page, from this one
// place; marks the current page in the navigation and shows who is signed in. Module scripts run
// in document order and each page loads this one first, so the header exists before page code.
import { currentSession } from './api.js';
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
    <a href="/sell/" data-signed-in hidden>Sell</a>
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

function renderSession(session) {
  const signedIn = !!(session && session.user);
  // Links for signed-in people only (Sell): shown once we know who is there.
  for (const a of document.querySelectorAll('.nav [data-signed-in]')) a.hidden = !signedIn;
  const slot = document.getElementById('session-slot');
  if (!slot) return;
  if (signedIn) {
    replace(
      slot,
      h(
        'a',
        { href: '/account/', class: 'who', title: 'Your account', dataset: { initial: session.user.username.charAt(0).toUpperCase() } },
        session.user.username
      )
    );
  } else {
    replace(slot, h('a', { href: '/account/', class: 'btn btn-small btn-ghost-light' }, 'Log in'));
  }
}

export function initLayout() {
  renderHeader();
  markCurrentPage();
  currentSession().then(renderSession);
  document.addEventListener('gpuhub:session', (e) => renderSession(e.detail));
}

initLayout();
