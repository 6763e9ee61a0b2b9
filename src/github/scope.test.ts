import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GitHubConfigError } from './errors.ts';
import {
  resolveEndpoints,
  resolveScope,
  scopeIfValid,
  scopeKey,
  scopeRouteParams,
  scopeRoutePrefix,
} from './scope.ts';

describe('scope resolution', () => {
  test('repository wins over organization over enterprise', () => {
    assert.deepEqual(resolveScope({ enterprise: 'big', organization: 'acme', repository: 'acme/app' }), {
      kind: 'repository',
      owner: 'acme',
      repo: 'app',
    });
    assert.deepEqual(resolveScope({ enterprise: 'big', organization: 'acme' }), {
      kind: 'organization',
      org: 'acme',
    });
    assert.deepEqual(resolveScope({ enterprise: 'big', organization: '', repository: '  ' }), {
      kind: 'enterprise',
      enterprise: 'big',
    });
  });

  test('bad or missing names give ARC’s errors', () => {
    for (const repository of ['acme', 'acme/app/x', '/app', 'acme/']) {
      assert.throws(
        () => resolveScope({ organization: 'acme', repository }),
        (e: unknown) =>
          e instanceof GitHubConfigError && e.message.includes(`invalid repository name: '${repository}'`),
        repository,
      );
    }
    assert.throws(() => resolveScope({}), /enterprise, organization and repository are all empty/);
  });

  test('keys, route templates and parameters per kind', () => {
    const cases = [
      [
        { kind: 'enterprise', enterprise: 'big' },
        'enterprises/big',
        '/enterprises/{enterprise}',
        { enterprise: 'big' },
      ],
      [{ kind: 'organization', org: 'acme' }, 'orgs/acme', '/orgs/{org}', { org: 'acme' }],
      [
        { kind: 'repository', owner: 'acme', repo: 'app' },
        'repos/acme/app',
        '/repos/{owner}/{repo}',
        { owner: 'acme', repo: 'app' },
      ],
    ] as const;
    for (const [scope, key, prefix, params] of cases) {
      assert.equal(scopeKey(scope), key);
      assert.equal(scopeRoutePrefix(scope), prefix);
      assert.deepEqual(scopeRouteParams(scope), params);
    }
  });
});

describe('endpoints', () => {
  test('github.com by default', () => {
    assert.deepEqual(resolveEndpoints(), {
      apiBaseUrl: 'https://api.github.com',
      serverUrl: 'https://github.com/',
      enterpriseServer: false,
    });
    assert.equal(resolveEndpoints({ githubUrl: 'https://github.com/' }).apiBaseUrl, 'https://api.github.com');
  });

  test('GHES: /api/v3 appended once, however the address is written', () => {
    for (const githubUrl of [
      'https://ghes.example.com',
      'https://ghes.example.com/',
      'https://ghes.example.com/api/v3',
      'https://ghes.example.com/api/v3/',
      ' https://ghes.example.com\n',
    ]) {
      assert.deepEqual(
        resolveEndpoints({ githubUrl }),
        {
          apiBaseUrl: 'https://ghes.example.com/api/v3',
          serverUrl: 'https://ghes.example.com/',
          enterpriseServer: true,
        },
        githubUrl,
      );
    }
    assert.equal(
      resolveEndpoints({ githubUrl: 'https://example.com/github' }).apiBaseUrl,
      'https://example.com/github/api/v3',
    );
  });

  test('API hosts keep their path; an explicit API URL overrides', () => {
    const ghe = resolveEndpoints({ githubUrl: 'https://api.octo.ghe.com' });
    assert.equal(ghe.apiBaseUrl, 'https://api.octo.ghe.com');
    assert.equal(ghe.serverUrl, 'https://octo.ghe.com/');
    const proxied = resolveEndpoints({
      githubUrl: 'https://ghes.example.com',
      apiUrl: 'http://127.0.0.1:8080/',
    });
    assert.equal(proxied.apiBaseUrl, 'http://127.0.0.1:8080');
    assert.equal(proxied.serverUrl, 'https://ghes.example.com/');
    assert.throws(() => resolveEndpoints({ githubUrl: 'ghes.example.com' }), GitHubConfigError);
    assert.throws(() => resolveEndpoints({ githubUrl: 'ftp://ghes.example.com' }), /http\(s\)/);
  });
});

test('scopeIfValid: the scope, or undefined for none or a malformed repository', () => {
  assert.deepEqual(scopeIfValid({ organization: 'acme' }), { kind: 'organization', org: 'acme' });
  assert.equal(scopeIfValid({}), undefined);
  assert.equal(scopeIfValid({ repository: 'no-slash' }), undefined);
});
