// The account page's sections as tabs (Overview, Storage, Billing and invoices, SSH keys, Top-ups
// and history, Notifications, API keys): one panel shown at a time, chosen by the URL's fragment,
// so that /account/#ssh-keys or /account/#billing (links from other pages) open that part. A
// fragment naming anything inside a panel (#topup-title, #rentals-section) opens its panel.
import { $, $$ } from './dom.js';

function panelFor(hash) {
  const id = decodeURIComponent(String(hash || '').replace(/^#/, ''));
  const target = id ? document.getElementById(id) : null;
  const panel = target && target.closest('.account-panel');
  return { panel: panel || $('.account-panel[data-panel="overview"]'), target: panel ? target : null };
}

export function selectAccountTab(hash, { scroll = false } = {}) {
  const { panel, target } = panelFor(hash);
  if (!panel) return;
  for (const p of $$('.account-panel')) p.hidden = p !== panel;
  for (const a of $$('.account-tabs a')) {
    const mine = panelFor(a.getAttribute('href')).panel === panel;
    if (mine) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  // A link to a part below the panel's top (a form, a title) scrolls there once it is shown.
  if (scroll && target && target !== panel && !target.matches('.account-panel > :first-child')) target.scrollIntoView();
}

export function initAccountTabs() {
  for (const a of $$('.account-tabs a')) {
    a.addEventListener('click', (e) => {
      e.preventDefault();
      const href = a.getAttribute('href');
      history.pushState(null, '', href);
      selectAccountTab(href);
    });
  }
  window.addEventListener('hashchange', () => selectAccountTab(location.hash, { scroll: true }));
  window.addEventListener('popstate', () => selectAccountTab(location.hash));
  selectAccountTab(location.hash, { scroll: true });
}
