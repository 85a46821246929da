// Administration: users, plans and first keys. Plans are picked from the configured ones.
import { $ } from './state.js';
import { announce } from './feedback.js';
import { api, busy } from './api.js';
import { cell, element, formatDuration, formValue, timeNode, validForm } from './dom.js';
import { revealSecret } from './secrets.js';

function renderUsers(users) {
  const rows = users.map((user) => {
    const row = element('tr', { attributes: { 'data-user-id': user.user_id } });
    const actions = element('td', { className: 'actions', attributes: { 'data-label': 'Actions' } });
    const pick = element('button', {
      className: 'secondary small',
      text: 'Select',
      attributes: { type: 'button', 'aria-label': `Fill the forms with ${user.user_id}` },
    });
    pick.addEventListener('click', () => {
      for (const id of ['plan-user-id', 'key-user-id', 'lookup-user-id']) $(id).value = user.user_id;
      $('plan-name').value = user.plan;
      $('plan-name').focus();
    });
    actions.append(pick);
    row.append(
      cell('User', element('code', { text: user.user_id })),
      cell('Plan', user.plan),
      cell('Created', timeNode(user.created)),
      actions,
    );
    return row;
  });
  $('users-body').replaceChildren(...rows);
  $('users-empty').hidden = rows.length > 0;
}

function planOption(plan, selected) {
  const option = element('option', {
    text: `${plan.name} (${plan.quota} per ${formatDuration(plan.window_seconds * 1000)})`,
    attributes: { value: plan.name },
  });
  // defaultSelected, so form.reset() returns to it.
  option.defaultSelected = selected;
  option.selected = selected;
  return option;
}

function renderPlans(payload) {
  const plans = payload.plans ?? [];
  const chosen = $('plan-name').value;
  $('new-user-plan').replaceChildren(...plans.map((plan) => planOption(plan, plan.name === payload.default_plan)));
  $('plan-name').replaceChildren(...plans.map((plan) => planOption(plan, plan.name === chosen)));
  $('plans-body').replaceChildren(
    ...plans.map((plan) => {
      const name = element('span', {}, [element('code', { text: plan.name })]);
      if (plan.name === payload.default_plan) name.append(' ', element('span', { className: 'tag', text: 'default' }));
      if (plan.name === payload.anonymous_plan) name.append(' ', element('span', { className: 'tag muted', text: 'anonymous' }));
      return element('tr', { attributes: { 'data-plan': plan.name } }, [
        cell('Plan', name),
        cell('Quota', String(plan.quota)),
        cell('Window', formatDuration(plan.window_seconds * 1000)),
        cell('Parallel', plan.max_parallel === undefined ? 'no limit' : String(plan.max_parallel)),
      ]);
    }),
  );
}

/** Fills both plan pickers and the plan table from GET /api/admin/plans. */
export async function loadPlans() {
  renderPlans(await api('GET', '/api/admin/plans'));
}

export async function loadUsers() {
  const payload = await api('GET', '/api/admin/users?limit=100');
  renderUsers(payload.users ?? []);
}

async function issueKey(userId) {
  const created = await api('POST', `/api/admin/users/${encodeURIComponent(userId)}/keys`, {});
  revealSecret(created.key, `The key for ${userId}. Give it to them; they sign in to this page with it.`);
}

export function bindAdminForms() {
  $('create-user-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    const plan = formValue(form, 'plan');
    await busy(form.querySelector('button[type=submit]'), async () => {
      await api('POST', '/api/admin/users', { user_id: userId, plan });
      if ($('new-user-key').checked) {
        await issueKey(userId);
        announce(`User ${userId} was created on plan ${plan} with a first key.`);
      } else {
        announce(`User ${userId} was created on plan ${plan}.`);
      }
      form.reset();
      await loadUsers();
    });
  });

  $('set-plan-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    const plan = formValue(form, 'plan');
    await busy(form.querySelector('button[type=submit]'), async () => {
      const updated = await api('PATCH', `/api/admin/users/${encodeURIComponent(userId)}`, { plan });
      announce(`User ${updated?.user_id ?? userId} is now on plan ${updated?.plan ?? plan}.`);
      await loadUsers();
    });
  });

  $('issue-key-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    await busy(form.querySelector('button[type=submit]'), async () => {
      await issueKey(userId);
      announce(`A new key was issued for ${userId}.`);
    });
  });

  $('lookup-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    await busy(form.querySelector('button[type=submit]'), async () => {
      const quota = await api('GET', `/api/chat/quota/${encodeURIComponent(userId)}`);
      const result = $('lookup-result');
      const facts = [
        ['User', quota.user_id],
        ['Plan', quota.plan],
        ['Used', `${quota.used} of ${quota.limit}`],
        ['Remaining', String(quota.remaining)],
      ];
      result.replaceChildren(
        ...facts.map(([term, value]) => element('div', {}, [element('dt', { text: term }), element('dd', { text: value })])),
      );
      result.append(element('div', {}, [element('dt', { text: 'Resets' }), element('dd', {}, [timeNode(quota.reset)])]));
      result.hidden = false;
    });
  });

  $('users-refresh').addEventListener('click', (event) => busy(event.currentTarget, loadUsers));
}
