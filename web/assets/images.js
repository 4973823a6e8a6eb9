// What a lease runs, as the customer picks it and sees it: the curated images of GET /v1/images
// (or any reference), a registry credential for a private image, extra container ports; and, on a
// lease, the image and the ports as the host's agent published them.
import { api } from './api.js';
import { h } from './dom.js';

let imagesPromise = null;

// {images: [{name, image, description, sshd}], default}, once per page load.
export function loadImages() {
  if (!imagesPromise) imagesPromise = api('GET', '/v1/images').catch(() => ({ images: [], default: '' }));
  return imagesPromise;
}

const NO_SSHD = 'This image has no SSH server: the first start installs one, so it takes a minute or two longer.';
const MAYBE_NO_SSHD = 'An image without an SSH server still works: the first start installs one, which takes longer.';

// Fills the image <select> (curated names, then "Another image…") and keeps the reference input
// and the note under it in step with the choice.
export async function setUpImagePicker(select, input, note) {
  const list = await loadImages();
  const custom = select.querySelector('option[value="custom"]');
  const byName = new Map(list.images.map((i) => [i.name, i]));
  for (const i of list.images) select.insertBefore(h('option', { value: i.name }, `${i.name} — ${i.image}`), custom);
  if (list.default) select.querySelector('option[value=""]').textContent = `The default image (${list.default})`;
  const sync = () => {
    input.hidden = select.value !== 'custom';
    const chosen = byName.get(select.value);
    if (chosen) note.textContent = chosen.description + (chosen.sshd ? '' : ' ' + NO_SSHD);
    else if (select.value === 'custom') note.textContent = MAYBE_NO_SSHD;
    else {
      const d = list.images.find((i) => i.image === list.default);
      note.textContent = d && d.sshd ? '' : NO_SSHD;
    }
  };
  select.addEventListener('change', sync);
  sync();
}

// The members of an order's body for what it runs: image, ports, registry_auth.
export function launchBody(f) {
  const body = {};
  const choice = f.image_choice.value;
  if (choice === 'custom') {
    if (f.image.value.trim()) body.image = f.image.value.trim();
  } else if (choice) {
    body.image = choice;
  }
  const ports = f.ports.value.split(/[\s,]+/).filter(Boolean);
  if (ports.length) body.ports = ports.map((p) => (/^\d{1,5}$/.test(p) ? Number(p) : p));
  const user = f['registry_auth.username'].value.trim();
  const password = f['registry_auth.password'].value;
  if (user || password) {
    body.registry_auth = { username: user, password };
    const server = f['registry_auth.serveraddress'].value.trim();
    if (server) body.registry_auth.serveraddress = server;
  }
  return body;
}

// After a successful order the secret leaves the page.
export function forgetCredential(f) {
  f['registry_auth.password'].value = '';
}

// A lease's image and ports: each published port as host:port once it runs, else the ports asked
// for; an image without sshd says the first start is slower.
export function launchCell(l, images) {
  const c = l.connection || {};
  const curated = (images || []).find((i) => i.image === l.image);
  const parts = [h('code', { class: 'image-ref' }, curated ? `${curated.name} (${l.image})` : l.image)];
  if (c.ports && c.ports.length) {
    parts.push(h('ul', { class: 'port-list' }, ...c.ports.map((p) => h('li', null, h('code', null, p.address), ` → container port ${p.container}`))));
  } else if (l.ports && l.ports.length) {
    parts.push(h('div', { class: 'hint' }, `Ports ${l.ports.join(', ')}: published when it runs`));
  }
  if (l.registry_credential) parts.push(h('div', { class: 'hint' }, 'Private registry credential: given'));
  if (l.status === 'active' && !c.ssh && !(curated && curated.sshd)) {
    parts.push(h('div', { class: 'hint' }, curated ? NO_SSHD : MAYBE_NO_SSHD));
  }
  return h('div', { class: 'launch' }, ...parts);
}
