import { compareRawAnswers } from '../support/raw-answers';

// The cases run once, each query on both the raw-answer path and the executor (test/support/raw-answers.ts).
compareRawAnswers('role-differential', () => require('./role-differential.cases'));
