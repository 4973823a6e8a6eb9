// Shared page chrome: marks the current page in the navigation and shows who is signed in.
import { currentSession } from './api.js';
import { h, replace } from './dom.js';

function markCurrentPage() {
  const path = location.pathname.replace(/index\.html$/, '');
  for (const a of document.querySelectorAll('.nav a')) {
    const href = a.getAttribute('href');
    const current = href === '/' ? path === '/' : path.startsWith(href);
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
  markCurrentPage();
  currentSession().then(renderSession);
  document.addEventListener('gpuhub:session', (e) => renderSession(e.detail));
}

initLayout();
